# A kernel that fails on purpose, and a PyTorch fallback.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

relu = cpu_kernel(
    "void relu(float* out, const float* x, long n) {"
    " for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f; }",
    "relu",
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        try:
            relu(out, x.double(), x.numel())  # wrong dtype: raises
        except Exception:
            return torch.relu(x)
        return out
