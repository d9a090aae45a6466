import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

fused_kernel = cpu_kernel(
    r"""
#include <math.h>

void fused_kernel(float* out, const float* x, float bound, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        double acc = 0.0;
        for (long i = r * cols; i < (r + 1) * cols; ++i) {
            float v = x[i];
            v = fminf(fmaxf(v, -bound), bound);  // torch.clamp(x, min=-self.bound, max=self.bound)
            acc += v;  // torch.mean(x, dim=-1)
        }
        float v = (float)(acc / cols);
        out[r] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        fused_kernel(out, x, self.bound, x.numel() // x.shape[-1], x.shape[-1])
        return out
