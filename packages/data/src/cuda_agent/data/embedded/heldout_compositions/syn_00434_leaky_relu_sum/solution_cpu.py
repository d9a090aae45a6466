import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, float negative_slope, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        double acc = 0.0;
        for (long i = r * cols; i < (r + 1) * cols; ++i) {
            float v = x[i];
            v = v > 0.f ? v : negative_slope * v;  // F.leaky_relu(x, self.negative_slope)
            acc += v;  // torch.sum(x, dim=-1)
        }
        float v = (float)(acc);
        out[r] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        fused_kernel(out, x, self.negative_slope, x.numel() // x.shape[-1], x.shape[-1])
        return out
