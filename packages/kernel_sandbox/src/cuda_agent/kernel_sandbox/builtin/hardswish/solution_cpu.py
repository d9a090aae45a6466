import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

hardswish = cpu_kernel(
    r"""
#include <math.h>

void hardswish(float* out, const float* x, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;
    }
}
""",
    "hardswish",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        hardswish(out, x, x.numel())
        return out
