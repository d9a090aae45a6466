import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

elu = cuda_kernel(
    r"""
extern "C" __global__ void elu(float* out, const float* x, float alpha, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = v > 0.f ? v : alpha * expm1f(v);
    }
}
""",
    "elu",
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        elu(grid=((n + 255) // 256,), block=(256,), args=(out, x, self.alpha, n))
        return out
