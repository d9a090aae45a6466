# Fault: a C function executes a trap instruction (__builtin_trap: SIGILL).
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

trap = cpu_kernel("void trap(long n) { if (n > 0) __builtin_trap(); }", "trap")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        trap(x.numel())
        return out
