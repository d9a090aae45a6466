import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

rmsnorm = cpu_kernel(
    r"""
#include <math.h>

void rmsnorm(float* out, const float* x, const float* w, long rows, long cols, float eps) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        float sq = 0.f;
        for (long j = 0; j < cols; ++j) sq += xr[j] * xr[j];
        float rms_inv = 1.f / sqrtf(sq / cols + eps);
        for (long j = 0; j < cols; ++j) yr[j] = xr[j] * rms_inv * w[j];
    }
}
""",
    "rmsnorm",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)  # holds the weight; the kernel does the compute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        rmsnorm(out, x, self.norm.weight, x.numel() // cols, cols, self.norm.eps)
        return out
