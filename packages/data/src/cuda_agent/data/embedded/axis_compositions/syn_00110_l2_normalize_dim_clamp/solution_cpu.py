import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, float bound, long outer, long cols, long inner) {
    #pragma omp parallel for
    for (long o = 0; o < outer * inner; ++o) {
        long first = o / inner * cols * inner + o % inner;  // the line's first
        double s = 0.0;
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            s += (double)v * v;
        }
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            v = (float)(v / sqrtf((float)s));  // x / torch.norm(x, p=2, dim=self.dim, keepdim=True)
            v = fminf(fmaxf(v, -bound), bound);  // torch.clamp(x, min=-self.bound, max=self.bound)
            out[i] = v;
        }
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, bound: float, dim: int = 1) -> None:
        super().__init__()
        self.bound = bound
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the normalised axis
        cols = x.shape[d]
        outer, inner = x.numel() // cols, 1
        out = torch.empty_like(x)
        fused_kernel(out, x, self.bound, outer, cols, inner)
        return out
