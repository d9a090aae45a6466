# Fault: an honest CUDA relu whose forward also calls a C counter that ends the process (_exit,
# from C: out of the static checks' sight) on the __EXIT_AT__th call, which the soak places
# inside the timing: the worker dies with work queued on the GPU.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel, cuda_kernel

tick = cpu_kernel(
    r"""
#include <unistd.h>
static long calls = 0;
void tick(long n) { if (++calls == __EXIT_AT__) _exit(3); }
""",
    "tick",
)

relu = cuda_kernel(
    r"""
extern "C" __global__ void relu(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] > 0.f ? x[i] : 0.f;
}
""",
    "relu",
)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        tick(n)
        return out
