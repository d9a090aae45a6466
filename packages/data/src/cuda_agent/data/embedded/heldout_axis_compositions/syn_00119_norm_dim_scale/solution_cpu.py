import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, float scale, long outer, long cols, long inner) {
    #pragma omp parallel for
    for (long o = 0; o < outer * inner; ++o) {
        long first = o / inner * cols * inner + o % inner;  // the output's first
        double acc = 0.0;
        for (long k = 0; k < cols; ++k) {
            long i = first + k * inner;
            float v = x[i];
            acc += (double)v * v;  // torch.linalg.vector_norm(x, dim=self.dim, keepdim=True)
        }
        float v = (float)(sqrt(acc));
        v = v * scale;  // x * self.scale
        out[o] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the reduced axis
        outer, cols, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1 :].numel()
        out = torch.empty(x.shape[:d] + (1,) + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        fused_kernel(out, x, self.scale, outer, cols, inner)
        return out
