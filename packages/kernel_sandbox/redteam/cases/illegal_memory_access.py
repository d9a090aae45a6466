# A CUDA kernel that writes far out of bounds (poisons the CUDA context).
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

bad = cuda_kernel(
    r"""
extern "C" __global__ void bad(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    out[i + (1ll << 40)] = x[i];
}
""",
    "bad",
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        bad(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        return out
