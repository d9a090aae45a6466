import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
#define INFINITY __int_as_float(0x7f800000)

extern "C" __global__ void fused_kernel(float* out, const float* x, float scale, long long rows, long long cols) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;  // (a whole warp: r is the warp's)
    double acc = INFINITY;
    for (long long i = r * cols + lane; i < (r + 1) * cols; i += 32) {
        float v = x[i];
        acc = fmin(acc, (double)v);  // torch.min(x, dim=self.dim, keepdim=True)[0]
    }
    for (int k = 16; k > 0; k >>= 1) {
        double o = __shfl_down_sync(0xffffffffu, acc, k);
        acc = fmin(acc, o);
    }
    if (lane != 0) return;
    float v = (float)(acc);
    v = v * scale;  // x * self.scale
    out[r] = v;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the reduced axis
        cols = x.shape[d]
        rows = x.numel() // cols
        out = torch.empty(x.shape[:d] + (1,) + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        args = (out, x, self.scale, rows, cols)
        fused_kernel(grid=((rows + 7) // 8,), block=(256,), args=args)
        return out
