# Still running when forward returns: the kernel waits about 5 ms (the GPU's global timer) before
# it writes a correct relu, and forward does not wait for it. Not a fault of the answer: the
# harness must wait for the device before it reads the outputs, so the verdict is ``ok``.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

relu = cuda_kernel(
    r"""
__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void relu(float* out, const float* x, long long n) {
    if (threadIdx.x == 0) {
        unsigned long long start = now_ns();
        while (now_ns() - start < 5000000ull) { }
    }
    __syncthreads();
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = x[i] > 0.f ? x[i] : 0.f;
}
""",
    "relu",
)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu(grid=(264,), block=(256,), args=(out, x, n))
        return out
