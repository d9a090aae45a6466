import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
#define INFINITY __int_as_float(0x7f800000)

extern "C" __global__ void fused_kernel(float* out, const float* x, float scale, long long cols) {
    __shared__ double part[256];
    long long r = blockIdx.x;
    double acc = INFINITY;
    for (long long i = r * cols + threadIdx.x; i < (r + 1) * cols; i += blockDim.x) {
        float v = x[i];
        acc = fmin(acc, (double)v);  // torch.min(x, dim=self.dim, keepdim=True)[0]
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            double o = part[threadIdx.x + k];
            part[threadIdx.x] = fmin(part[threadIdx.x], o);
        }
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    acc = part[0];
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
        out = torch.empty(x.shape[:d] + (1,) + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        args = (out, x, self.scale, cols)
        fused_kernel(grid=(x.numel() // cols,), block=(256,), args=args)
        return out
