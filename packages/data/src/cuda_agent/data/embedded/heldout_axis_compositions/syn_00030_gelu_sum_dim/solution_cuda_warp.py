import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
extern "C" __global__ void fused_kernel(float* out, const float* x, long long rows, long long cols) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;  // (a whole warp: r is the warp's)
    double acc = 0.0;
    for (long long i = r * cols + lane; i < (r + 1) * cols; i += 32) {
        float v = x[i];
        v = 0.5f * v * (1.f + erff(v * 0.70710678f));  // F.gelu(x)
        acc += v;  // torch.sum(x, dim=self.dim, keepdim=True)
    }
    for (int k = 16; k > 0; k >>= 1) {
        double o = __shfl_down_sync(0xffffffffu, acc, k);
        acc = acc + o;
    }
    if (lane != 0) return;
    float v = (float)(acc);
    out[r] = v;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the reduced axis
        cols = x.shape[d]
        rows = x.numel() // cols
        out = torch.empty(x.shape[:d] + (1,) + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        args = (out, x, rows, cols)
        fused_kernel(grid=((rows + 7) // 8,), block=(256,), args=args)
        return out
