# Fault: a C function writes through a null pointer (SIGSEGV). It takes no tensors, so the same
# candidate runs on either backend (on CUDA it is host code beside the GPU's context).
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# The address is 0 whatever the size: ``p[n]`` (as this case read before) is address 4n, which
# for a large input can be mapped memory, and then nothing faults (an H100 soak judged one such
# run ``incorrect``: its output, never written, held NaN).
crash = cpu_kernel("void crash(long n) { volatile float* p = 0; p[0] = (float)n; }", "crash")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        crash(x.numel())
        return out
