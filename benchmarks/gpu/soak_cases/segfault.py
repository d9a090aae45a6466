# Fault: a C function writes through a null pointer (SIGSEGV). It takes no tensors, so the same
# candidate runs on either backend (on CUDA it is host code beside the GPU's context).
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

crash = cpu_kernel("void crash(long n) { volatile float* p = 0; p[n] = 1.f; }", "crash")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        crash(x.numel())
        return out
