import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, const float* y, float shift, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        v = v - y[i];  // x - y
        v = v + shift;  // x + self.shift
        out[i] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        fused_kernel(out, x, y, self.shift, x.numel())
        return out
