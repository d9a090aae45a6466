import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, long outer, long cols, long inner) {
    #pragma omp parallel for
    for (long o = 0; o < outer * inner; ++o) {
        long first = o / inner * cols * inner + o % inner;  // the line's first
        double s = 0.0;
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            s += fabs((double)v);
        }
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            v = (float)(v / ((float)s / cols));  // x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)
            v = v * v;  // torch.square(x)
            out[i] = v;
        }
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the normalised axis
        outer, cols, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1 :].numel()
        out = torch.empty_like(x)
        fused_kernel(out, x, outer, cols, inner)
        return out
