import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

scale_shift_relu_kernel = cuda_kernel(
    r"""
extern "C" __global__ void scale_shift_relu_kernel(
        float* out, const float* x, float scale, float shift, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i] * scale + shift, 0.f);
}
""",
    "scale_shift_relu_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, scale: float, shift: float) -> None:
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        args = (out, x, self.scale, self.shift, n)
        scale_shift_relu_kernel(grid=((n + 255) // 256,), block=(256,), args=args)
        return out
