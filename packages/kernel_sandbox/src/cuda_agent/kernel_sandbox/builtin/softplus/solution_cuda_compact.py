import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

softplus_kernel = cuda_kernel(
    r"""
extern "C" __global__ void softplus_kernel(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = v > 20.f ? v : log1pf(expf(v));
    }
}
""",
    "softplus_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        softplus_kernel(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        return out
