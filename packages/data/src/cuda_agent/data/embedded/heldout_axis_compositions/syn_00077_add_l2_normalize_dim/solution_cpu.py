import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, const float* y, long outer, long cols, long inner) {
    #pragma omp parallel for
    for (long o = 0; o < outer * inner; ++o) {
        long first = o / inner * cols * inner + o % inner;  // the line's first
        double s = 0.0;
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            v = v + y[i];
            s += (double)v * v;
        }
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            v = v + y[i];  // x + y
            v = (float)(v / sqrtf((float)s));  // x / torch.norm(x, p=2, dim=1, keepdim=True)
            out[i] = v;
        }
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        d = 1  # the normalised axis
        cols = x.shape[d]
        outer, inner = x.numel() // cols, 1
        out = torch.empty_like(x)
        fused_kernel(out, x, y, outer, cols, inner)
        return out
