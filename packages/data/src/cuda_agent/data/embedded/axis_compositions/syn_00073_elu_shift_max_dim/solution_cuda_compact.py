import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
#define INFINITY __int_as_float(0x7f800000)

extern "C" __global__ void fused_kernel(float* out, const float* x, float alpha, float shift, long long cols) {
    __shared__ double part[256];
    long long r = blockIdx.x;
    double acc = -INFINITY;
    for (long long i = r * cols + threadIdx.x; i < (r + 1) * cols; i += blockDim.x) {
        float v = x[i];
        v = v > 0.f ? v : alpha * (expf(v) - 1.f);  // F.elu(x, alpha=self.alpha)
        v = v + shift;  // x + self.shift
        acc = fmax(acc, (double)v);  // torch.max(x, dim=self.dim)[0]
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            double o = part[threadIdx.x + k];
            part[threadIdx.x] = fmax(part[threadIdx.x], o);
        }
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    acc = part[0];
    float v = (float)(acc);
    out[r] = v;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, alpha: float, shift: float) -> None:
        super().__init__()
        self.dim = dim
        self.alpha = alpha
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the reduced axis
        cols = x.shape[d]
        out = torch.empty(x.shape[:d] + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        args = (out, x, self.alpha, self.shift, cols)
        fused_kernel(grid=(x.numel() // cols,), block=(256,), args=args)
        return out
