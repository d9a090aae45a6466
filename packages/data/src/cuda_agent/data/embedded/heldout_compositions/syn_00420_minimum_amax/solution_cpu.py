import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, const float* y, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        double acc = -INFINITY;
        for (long i = r * cols; i < (r + 1) * cols; ++i) {
            float v = x[i];
            v = fminf(v, y[i]);  // torch.minimum(x, y)
            acc = fmax(acc, (double)v);  // torch.amax(x, dim=-1)
        }
        float v = (float)(acc);
        out[r] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        fused_kernel(out, x, y, x.numel() // x.shape[-1], x.shape[-1])
        return out
