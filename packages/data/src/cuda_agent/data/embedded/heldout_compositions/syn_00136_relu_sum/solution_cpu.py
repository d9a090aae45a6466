import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        double acc = 0.0;
        for (long i = r * cols; i < (r + 1) * cols; ++i) {
            float v = x[i];
            v = v > 0.f ? v : 0.f;  // torch.relu(x)
            acc += v;  // torch.sum(x, dim=-1)
        }
        float v = (float)(acc);
        out[r] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        fused_kernel(out, x, x.numel() // x.shape[-1], x.shape[-1])
        return out
