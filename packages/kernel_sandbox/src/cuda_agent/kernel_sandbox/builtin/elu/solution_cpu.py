import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

elu = cpu_kernel(
    r"""
#include <math.h>

void elu(float* out, const float* x, float alpha, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = v > 0.f ? v : alpha * expm1f(v);
    }
}
""",
    "elu",
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        elu(out, x, self.alpha, x.numel())
        return out
