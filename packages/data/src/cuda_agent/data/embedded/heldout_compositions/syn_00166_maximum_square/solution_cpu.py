import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, const float* y, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        v = fmaxf(v, y[i]);  // torch.maximum(x, y)
        v = v * v;  // torch.square(x)
        out[i] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        fused_kernel(out, x, y, x.numel())
        return out
