import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# The sum x + residual is written to out first, then normalized in place.
residual_layernorm = cpu_kernel(
    r"""
#include <math.h>

void residual_layernorm(float* out, const float* x, const float* res, const float* w,
                        const float* b, long rows, long cols, float eps) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        float* yr = out + r * cols;
        float mean = 0.f;
        for (long j = 0; j < cols; ++j) {
            yr[j] = x[r * cols + j] + res[r * cols + j];
            mean += yr[j];
        }
        mean /= cols;
        float var = 0.f;
        for (long j = 0; j < cols; ++j) var += (yr[j] - mean) * (yr[j] - mean);
        var /= cols;
        float rstd = 1.f / sqrtf(var + eps);
        for (long j = 0; j < cols; ++j) yr[j] = (yr[j] - mean) * rstd * w[j] + b[j];
    }
}
""",
    "residual_layernorm",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)  # holds the weight and bias; the kernel does the compute

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x, residual = x.contiguous(), residual.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        n = self.norm
        residual_layernorm(out, x, residual, n.weight, n.bias, x.numel() // cols, cols, n.eps)
        return out
