import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, const float* y, float negative_slope, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        v = v > 0.f ? v : negative_slope * v;  // F.leaky_relu(x, self.negative_slope)
        v = v + y[i];  // x + y
        out[i] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        fused_kernel(out, x, y, self.negative_slope, x.numel())
        return out
