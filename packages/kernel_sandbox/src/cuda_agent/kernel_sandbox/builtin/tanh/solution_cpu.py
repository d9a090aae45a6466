import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

tanh_act = cpu_kernel(
    r"""
#include <math.h>

void tanh_act(float* out, const float* x, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) out[i] = tanhf(x[i]);
}
""",
    "tanh_act",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        tanh_act(out, x, x.numel())
        return out
