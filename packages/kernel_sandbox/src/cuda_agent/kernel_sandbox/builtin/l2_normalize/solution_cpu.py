import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

l2_normalize = cpu_kernel(
    r"""
#include <math.h>

void l2_normalize(float* out, const float* x, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        float sq = 0.f;
        for (long j = 0; j < cols; ++j) sq += xr[j] * xr[j];
        float inv = 1.f / fmaxf(sqrtf(sq), 1e-12f);
        for (long j = 0; j < cols; ++j) yr[j] = xr[j] * inv;
    }
}
""",
    "l2_normalize",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        l2_normalize(out, x, x.numel() // cols, cols)
        return out
