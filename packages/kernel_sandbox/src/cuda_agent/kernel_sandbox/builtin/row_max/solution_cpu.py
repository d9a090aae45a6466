import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

row_max = cpu_kernel(
    r"""
#include <math.h>

void row_max(float* out, const float* x, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float m = -INFINITY;
        for (long j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
        out[r] = m;
    }
}
""",
    "row_max",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        cols = x.shape[-1]
        row_max(out, x, x.numel() // cols, cols)
        return out
