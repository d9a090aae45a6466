# The same, with the operator reached through a module-level alias the AST cannot resolve.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

noop = cpu_kernel("void noop(float* out, long n) { (void)out; (void)n; }", "noop")
ACT = torch.relu


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        noop(out, out.numel())
        return ACT(x)
