import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

scale_tanh_add = cpu_kernel(
    r"""
#include <math.h>

void scale_tanh_add(float* out, const float* x, const float* y, float scale, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) out[i] = tanhf(x[i] * scale) + y[i];
}
""",
    "scale_tanh_add",
)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        scale_tanh_add(out, x, y, self.scale, x.numel())
        return out
