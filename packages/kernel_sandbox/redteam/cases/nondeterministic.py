# State hidden in C: every other call is off by 0.5.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

relu = cpu_kernel(
    r"""
void relu(float* out, const float* x, long n) {
    static int calls = 0;
    calls++;
    for (long i = 0; i < n; ++i) out[i] = (x[i] > 0.f ? x[i] : 0.f) + (calls % 2) * 0.5f;
}
""",
    "relu",
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        relu(out, x, x.numel())
        return out
