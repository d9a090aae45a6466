import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
extern "C" __global__ void fused_kernel(float* out, const float* x, const float* y, long long outer, long long cols, long long inner) {
    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= outer * inner) return;
    long long first = o / inner * cols * inner + o % inner;  // the line's first
    double s = 0.0;
    for (long long k = 0; k < cols; ++k) {
        long long i = first + k * inner;
        float v = x[i];
        v = v * y[i];
        s += fabs((double)v);
    }
    for (long long k = 0; k < cols; ++k) {
        long long i = first + k * inner;
        float v = x[i];
        v = v * y[i];  // x * y
        v = (float)(v / ((float)s / cols));  // x / torch.mean(torch.abs(x), dim=1, keepdim=True)
        out[i] = v;
    }
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        d = 1  # the normalised axis
        outer, cols, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1 :].numel()
        out = torch.empty_like(x)
        args = (out, x, y, outer, cols, inner)
        fused_kernel(grid=((outer * inner + 255) // 256,), block=(256,), args=args)
        return out
