import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        v = 0.5f * v * (1.f + erff(v * 0.70710678f));  // F.gelu(x)
        v = fminf(fmaxf(v, 0.f), 6.f);  // F.relu6(x)
        out[i] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        fused_kernel(out, x, x.numel())
        return out
