import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
extern "C" __global__ void fused_kernel(float* out, const float* x, const float* y, float negative_slope, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    v = v > 0.f ? v : negative_slope * v;  // F.leaky_relu(x, self.negative_slope)
    v = v + y[i];  // x + y
    out[i] = v;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        args = (out, x, y, self.negative_slope, n)
        fused_kernel(grid=((n + 255) // 256,), block=(256,), args=args)
        return out
