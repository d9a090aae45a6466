import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

sigmoid_gate = cpu_kernel(
    r"""
#include <math.h>

void sigmoid_gate(float* out, const float* x, const float* gate, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) out[i] = x[i] / (1.f + expf(-gate[i]));
}
""",
    "sigmoid_gate",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        x, gate = x.contiguous(), gate.contiguous()
        out = torch.empty_like(x)
        sigmoid_gate(out, x, gate, x.numel())
        return out
