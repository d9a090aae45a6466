import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

silu = cpu_kernel(
    r"""
#include <math.h>

void silu(float* out, const float* x, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) out[i] = x[i] / (1.f + expf(-x[i]));
}
""",
    "silu",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        silu(out, x, x.numel())
        return out
