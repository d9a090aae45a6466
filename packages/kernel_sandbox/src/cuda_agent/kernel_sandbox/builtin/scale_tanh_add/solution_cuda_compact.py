import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

scale_tanh_add_kernel = cuda_kernel(
    r"""
extern "C" __global__ void scale_tanh_add_kernel(
        float* out, const float* x, const float* y, float scale, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tanhf(x[i] * scale) + y[i];
}
""",
    "scale_tanh_add_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        args = (out, x, y, self.scale, n)
        scale_tanh_add_kernel(grid=((n + 255) // 256,), block=(256,), args=args)
        return out
