import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
extern "C" __global__ void fused_kernel(float* out, const float* x, long long outer, long long cols, long long inner) {
    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= outer * inner) return;
    long long first = o / inner * cols * inner + o % inner;  // the line's first
    double s = 0.0;
    for (long long k = 0; k < cols; ++k) {
        long long i = first + k * inner;
        float v = x[i];
        v = tanhf(v);
        s += fabs((double)v);
    }
    for (long long k = 0; k < cols; ++k) {
        long long i = first + k * inner;
        float v = x[i];
        v = tanhf(v);  // torch.tanh(x)
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
        outer, cols, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1 :].numel()
        out = torch.empty_like(x)
        args = (out, x, outer, cols, inner)
        fused_kernel(grid=((outer * inner + 255) // 256,), block=(256,), args=args)
        return out
