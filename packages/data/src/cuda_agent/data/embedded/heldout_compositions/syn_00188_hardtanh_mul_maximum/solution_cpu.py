import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, const float* y, const float* z, float limit, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        v = fminf(fmaxf(v, -limit), limit);  // F.hardtanh(x, -self.limit, self.limit)
        v = v * y[i];  // x * y
        v = fmaxf(v, z[i]);  // torch.maximum(x, z)
        out[i] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, limit: float) -> None:
        super().__init__()
        self.limit = limit

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x, y, z = x.contiguous(), y.contiguous(), z.contiguous()
        out = torch.empty_like(x)
        fused_kernel(out, x, y, z, self.limit, x.numel())
        return out
