# Fault: a CUDA kernel executes a trap instruction (__trap(), what a failed device assert ends
# in): a sticky error, the context is lost.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

trap = cuda_kernel(
    r"""
extern "C" __global__ void trap(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i];
    if (i == n / 2) __trap();
}
""",
    "trap",
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        trap(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        return out
