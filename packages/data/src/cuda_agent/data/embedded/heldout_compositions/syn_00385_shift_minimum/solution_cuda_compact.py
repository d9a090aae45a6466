import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
extern "C" __global__ void fused_kernel(float* out, const float* x, const float* y, float shift, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    v = v + shift;  // x + self.shift
    v = fminf(v, y[i]);  // torch.minimum(x, y)
    out[i] = v;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        args = (out, x, y, self.shift, n)
        fused_kernel(grid=((n + 255) // 256,), block=(256,), args=args)
        return out
