import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

softplus = cpu_kernel(
    r"""
#include <math.h>

void softplus(float* out, const float* x, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = v > 20.f ? v : log1pf(expf(v));
    }
}
""",
    "softplus",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        softplus(out, x, x.numel())
        return out
