# Fault: a launch that asks for 1 GiB of dynamic shared memory (far over the 48 KiB a kernel may
# have without opting in, and the 227 KiB it may with): cuLaunchKernel refuses it. The error is
# not sticky, so the worker's context survives it.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

relu = cuda_kernel(
    r"""
extern "C" __global__ void relu(float* out, const float* x, long long n) {
    extern __shared__ float tile[];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    if (i < n) out[i] = tile[threadIdx.x] > 0.f ? tile[threadIdx.x] : 0.f;
}
""",
    "relu",
)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu(grid=((n + 255) // 256,), block=(256,), args=(out, x, n), shared_mem=1 << 30)
        return out
