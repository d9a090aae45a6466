# Fault: an off-by-one loop writes one element past the end of its output (the right answer
# otherwise; the write lands in whatever memory follows the buffer).
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

relu = cpu_kernel(
    "void relu(float* out, const float* x, long n) {"
    " for (long i = 0; i <= n; ++i) out[i] = i < n && x[i] > 0.f ? x[i] : 0.f; }",
    "relu",
)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu(out, x, x.numel())
        return out
