import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
extern "C" __global__ void fused_kernel(float* out, const float* x, long long cols) {
    __shared__ double part[256];
    long long r = blockIdx.x;
    double acc = 0.0;
    for (long long i = r * cols + threadIdx.x; i < (r + 1) * cols; i += blockDim.x) {
        float v = x[i];
        v = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));  // F.gelu(x, approximate="tanh")
        acc += v;  // torch.mean(x, dim=self.dim, keepdim=True)
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            double o = part[threadIdx.x + k];
            part[threadIdx.x] = part[threadIdx.x] + o;
        }
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    acc = part[0];
    float v = (float)(acc / cols);
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
        out = torch.empty(x.shape[:d] + (1,) + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        args = (out, x, cols)
        fused_kernel(grid=(x.numel() // cols,), block=(256,), args=args)
        return out
