import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

add_mul = cpu_kernel(
    r"""
void add_mul(float* out, const float* a, const float* b, const float* c, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) out[i] = (a[i] + b[i]) * c[i];
}
""",
    "add_mul",
)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        a, b, c = a.contiguous(), b.contiguous(), c.contiguous()
        out = torch.empty_like(a)
        add_mul(out, a, b, c, a.numel())
        return out
