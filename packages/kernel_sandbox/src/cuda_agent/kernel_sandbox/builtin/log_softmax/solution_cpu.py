import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

log_softmax = cpu_kernel(
    r"""
#include <math.h>

void log_softmax(float* out, const float* x, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        float m = -INFINITY;
        for (long j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
        float sum = 0.f;
        for (long j = 0; j < cols; ++j) sum += expf(xr[j] - m);
        float lse = m + logf(sum);
        for (long j = 0; j < cols; ++j) yr[j] = xr[j] - lse;
    }
}
""",
    "log_softmax",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        log_softmax(out, x, x.numel() // cols, cols)
        return out
