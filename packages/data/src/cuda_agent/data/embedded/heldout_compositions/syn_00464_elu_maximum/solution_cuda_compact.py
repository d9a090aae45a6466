import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
extern "C" __global__ void fused_kernel(float* out, const float* x, const float* y, float alpha, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    v = v > 0.f ? v : alpha * (expf(v) - 1.f);  // F.elu(x, alpha=self.alpha)
    v = fmaxf(v, y[i]);  // torch.maximum(x, y)
    out[i] = v;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        args = (out, x, y, self.alpha, n)
        fused_kernel(grid=((n + 255) // 256,), block=(256,), args=args)
        return out
