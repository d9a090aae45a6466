import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

relu_kernel = cuda_kernel(
    r"""
extern "C" __global__ void relu_kernel(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = v > 0.f ? v : 0.f;
    }
}
""",
    "relu_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        return out
