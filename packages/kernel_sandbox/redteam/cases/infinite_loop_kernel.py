# A kernel that never returns.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

spin = cpu_kernel(
    "void spin(float* out, long n) { volatile long i = 0; for (;;) { i += n; } out[0] = 0; }",
    "spin",
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        spin(out, x.numel())
        return out
