import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

add_relu_mul = cpu_kernel(
    r"""
void add_relu_mul(float* out, const float* a, const float* b, const float* c, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float s = a[i] + b[i];
        out[i] = (s > 0.f ? s : 0.f) * c[i];
    }
}
""",
    "add_relu_mul",
)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        a, b, c = a.contiguous(), b.contiguous(), c.contiguous()
        out = torch.empty_like(a)
        add_relu_mul(out, a, b, c, a.numel())
        return out
