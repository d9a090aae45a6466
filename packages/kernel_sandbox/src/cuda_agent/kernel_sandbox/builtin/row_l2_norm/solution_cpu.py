import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

row_l2_norm = cpu_kernel(
    r"""
#include <math.h>

void row_l2_norm(float* out, const float* x, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        double sq = 0.0;
        for (long j = 0; j < cols; ++j) sq += (double)xr[j] * xr[j];
        out[r] = (float)sqrt(sq);
    }
}
""",
    "row_l2_norm",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        cols = x.shape[-1]
        row_l2_norm(out, x, x.numel() // cols, cols)
        return out
