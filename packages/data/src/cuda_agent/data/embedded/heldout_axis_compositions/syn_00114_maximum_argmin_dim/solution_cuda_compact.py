import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
#define INFINITY __int_as_float(0x7f800000)

extern "C" __global__ void fused_kernel(long long* out, const float* x, const float* y, long long outer, long long cols, long long inner) {
    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= outer * inner) return;
    long long first = o / inner * cols * inner + o % inner;  // the output's first
    double acc = INFINITY;
    long long at = 0;  // the first extreme's position
    for (long long k = 0; k < cols; ++k) {
        long long i = first + k * inner;  // a row a thread
        float v = x[i];
        v = fmaxf(v, y[i]);  // torch.maximum(x, y)
        if ((double)v < acc) { acc = v; at = k; }  // torch.argmin(x, dim=self.dim)
    }
    out[o] = at;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        d = self.dim % x.dim()  # the reduced axis
        cols = x.shape[d]
        outer, inner = x.numel() // cols, 1
        out = torch.empty(x.shape[:d] + x.shape[d + 1 :], dtype=torch.int64, device=x.device)
        args = (out, x, y, outer, cols, inner)
        fused_kernel(grid=((outer * inner + 255) // 256,), block=(256,), args=args)
        return out
