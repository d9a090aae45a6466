import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

layernorm = cpu_kernel(
    r"""
#include <math.h>

void layernorm(float* out, const float* x, const float* w, const float* b,
               long rows, long cols, float eps) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        float mean = 0.f;
        for (long j = 0; j < cols; ++j) mean += xr[j];
        mean /= cols;
        float var = 0.f;
        for (long j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
        var /= cols;
        float rstd = 1.f / sqrtf(var + eps);
        for (long j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
    }
}
""",
    "layernorm",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)  # holds the weight and bias; the kernel does the compute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        layernorm(out, x, self.norm.weight, self.norm.bias, x.numel() // cols, cols, self.norm.eps)
        return out
