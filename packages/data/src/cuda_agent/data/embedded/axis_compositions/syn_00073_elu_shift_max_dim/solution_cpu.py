import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, float alpha, float shift, long outer, long cols, long inner) {
    #pragma omp parallel for
    for (long o = 0; o < outer * inner; ++o) {
        long first = o / inner * cols * inner + o % inner;  // the output's first
        double acc = -INFINITY;
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            v = v > 0.f ? v : alpha * (expf(v) - 1.f);  // F.elu(x, alpha=self.alpha)
            v = v + shift;  // x + self.shift
            acc = fmax(acc, (double)v);  // torch.max(x, dim=self.dim)[0]
        }
        float v = (float)(acc);
        out[o] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, alpha: float, shift: float) -> None:
        super().__init__()
        self.dim = dim
        self.alpha = alpha
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the reduced axis
        cols = x.shape[d]
        outer, inner = x.numel() // cols, 1
        out = torch.empty(x.shape[:d] + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        fused_kernel(out, x, self.alpha, self.shift, outer, cols, inner)
        return out
