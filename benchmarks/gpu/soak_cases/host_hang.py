# Fault: host C code that never returns (the process hangs in a foreign call, not in Python).
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

hang = cpu_kernel("void hang(long n) { volatile long i = 0; for (;;) { i += n; } }", "hang")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        hang(x.numel())
        return out
