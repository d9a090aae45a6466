# Fault: a failed assertion in host C code (abort: SIGABRT).
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

check = cpu_kernel(
    "#include <stdlib.h>\nvoid check(long n) { if (n > 0) abort(); }",
    "check",
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        check(x.numel())
        return out
