import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(long long* out, const float* x, float limit, long outer, long cols, long inner) {
    #pragma omp parallel for
    for (long o = 0; o < outer * inner; ++o) {
        long first = o / inner * cols * inner + o % inner;  // the output's first
        double acc = -INFINITY;
        long long at = 0;  // the first extreme's position
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            v = fminf(fmaxf(v, -limit), limit);  // F.hardtanh(x, -self.limit, self.limit)
            if ((double)v > acc) { acc = v; at = k; }  // torch.argmax(x, dim=self.dim)
        }
        out[o] = at;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, limit: float, dim: int = 1) -> None:
        super().__init__()
        self.limit = limit
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the reduced axis
        outer, cols, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1 :].numel()
        out = torch.empty(x.shape[:d] + x.shape[d + 1 :], dtype=torch.int64, device=x.device)
        fused_kernel(out, x, self.limit, outer, cols, inner)
        return out
