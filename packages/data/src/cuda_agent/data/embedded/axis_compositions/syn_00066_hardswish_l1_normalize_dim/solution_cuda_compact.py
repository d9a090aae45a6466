import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
extern "C" __global__ void fused_kernel(float* out, const float* x, long long rows, long long cols) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;  // (a whole warp: r is the warp's)
    double s = 0.0;
    for (long long i = r * cols + lane; i < (r + 1) * cols; i += 32) {
        float v = x[i];
        v = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;
        s += fabs((double)v);
    }
    for (int k = 16; k > 0; k >>= 1) {  // the row's, in every lane
        s = s + __shfl_xor_sync(0xffffffffu, s, k);
    }
    for (long long i = r * cols + lane; i < (r + 1) * cols; i += 32) {
        float v = x[i];
        v = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;  // F.hardswish(x)
        v = (float)(v / ((float)s / cols));  // x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)
        out[i] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the normalised axis
        cols = x.shape[d]
        rows = x.numel() // cols
        out = torch.empty_like(x)
        args = (out, x, rows, cols)
        fused_kernel(grid=((rows + 7) // 8,), block=(256,), args=args)
        return out
