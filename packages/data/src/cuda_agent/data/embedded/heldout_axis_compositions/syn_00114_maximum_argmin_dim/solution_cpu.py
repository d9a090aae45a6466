import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(long long* out, const float* x, const float* y, long outer, long cols, long inner) {
    #pragma omp parallel for
    for (long o = 0; o < outer * inner; ++o) {
        long first = o / inner * cols * inner + o % inner;  // the output's first
        double acc = INFINITY;
        long long at = 0;  // the first extreme's position
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            v = fmaxf(v, y[i]);  // torch.maximum(x, y)
            if ((double)v < acc) { acc = v; at = k; }  // torch.argmin(x, dim=self.dim)
        }
        out[o] = at;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        d = self.dim % x.dim()  # the reduced axis
        cols = x.shape[d]
        outer, inner = x.numel() // cols, 1
        out = torch.empty(x.shape[:d] + x.shape[d + 1 :], dtype=torch.int64, device=x.device)
        fused_kernel(out, x, y, outer, cols, inner)
        return out
