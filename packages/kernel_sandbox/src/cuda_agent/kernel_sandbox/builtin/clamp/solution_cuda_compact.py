import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

clamp_kernel = cuda_kernel(
    r"""
extern "C" __global__ void clamp_kernel(
        float* out, const float* x, float lo, float hi, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fminf(fmaxf(x[i], lo), hi);
}
""",
    "clamp_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, min_val: float, max_val: float) -> None:
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        args = (out, x, self.min_val, self.max_val, n)
        clamp_kernel(grid=((n + 255) // 256,), block=(256,), args=args)
        return out
