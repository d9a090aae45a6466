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
        acc += v;  // torch.sum(x, dim=2, keepdim=True)
    }
    for (int k = 16; k > 0; k >>= 1) {
        double o = __shfl_down_sync(0xffffffffu, acc, k);
        acc = acc + o;
    }
    if (lane != 0) return;
    float v = (float)(acc);
    v = v * tanhf(v > 20.f ? v : log1pf(expf(v)));  // F.mish(x)
    out[r] = v;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = 2  # the reduced axis
        cols = x.shape[d]
        rows = x.numel() // cols
        out = torch.empty(x.shape[:d] + (1,) + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        args = (out, x, rows, cols)
        fused_kernel(grid=((rows + 7) // 8,), block=(256,), args=args)
        return out
