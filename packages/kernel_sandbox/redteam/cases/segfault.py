# A kernel that writes through a null pointer.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

crash = cpu_kernel(
    "void crash(float* out, long n) { volatile float* p = 0; p[n] = 1.f; out[0] = p[0]; }",
    "crash",
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        crash(out, x.numel())
        return out
