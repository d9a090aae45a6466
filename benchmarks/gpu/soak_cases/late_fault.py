# Fault: forward returns at once while its kernel waits about 2 ms (the GPU's global timer) and
# then writes far out of bounds: the illegal address surfaces only when the harness waits for the
# device, after forward has returned.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

late = cuda_kernel(
    r"""
__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void late(float* out, const float* x, long long n) {
    if (threadIdx.x == 0) {
        unsigned long long start = now_ns();
        while (now_ns() - start < 2000000ull) { }
    }
    __syncthreads();
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i + (1ll << 40)] = x[i];
}
""",
    "late",
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        late(grid=(264,), block=(256,), args=(out, x, n))
        return out
