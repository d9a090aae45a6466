import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

clamp = cpu_kernel(
    r"""
#include <math.h>

void clamp(float* out, const float* x, float min_val, float max_val, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) out[i] = fminf(fmaxf(x[i], min_val), max_val);
}
""",
    "clamp",
)


class ModelNew(nn.Module):
    def __init__(self, min_val: float, max_val: float) -> None:
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        clamp(out, x, self.min_val, self.max_val, x.numel())
        return out
