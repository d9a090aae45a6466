# Fault: a CUDA kernel stores floats through a pointer one byte off their alignment
# (cudaErrorMisalignedAddress: a sticky error, the context is lost).
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

skew = cuda_kernel(
    r"""
extern "C" __global__ void skew(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float* p = (float*)((char*)out + 1);
    if (i < n - 1) p[i] = x[i];
}
""",
    "skew",
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        skew(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        return out
