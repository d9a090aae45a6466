import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

add_relu_mul_kernel = cuda_kernel(
    r"""
extern "C" __global__ void add_relu_mul_kernel(
        float* out, const float* a, const float* b, const float* c, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(a[i] + b[i], 0.f) * c[i];
}
""",
    "add_relu_mul_kernel",
)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        a, b, c = a.contiguous(), b.contiguous(), c.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_relu_mul_kernel(grid=((n + 255) // 256,), block=(256,), args=(out, a, b, c, n))
        return out
