import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# max(x / T) = max(x) / T for T > 0, so the row max is taken on x directly.
softmax_temperature = cpu_kernel(
    r"""
#include <math.h>

void softmax_temperature(float* out, const float* x, float inv_t, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        float m = -INFINITY;
        for (long j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
        float sum = 0.f;
        for (long j = 0; j < cols; ++j) {
            yr[j] = expf((xr[j] - m) * inv_t);
            sum += yr[j];
        }
        float inv = 1.f / sum;
        for (long j = 0; j < cols; ++j) yr[j] *= inv;
    }
}
""",
    "softmax_temperature",
)


class ModelNew(nn.Module):
    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        softmax_temperature(out, x, 1.0 / self.temperature, x.numel() // cols, cols)
        return out
