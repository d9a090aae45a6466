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
        acc += v;  // torch.sum(x, dim=2, keepdim=True)
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
        out = torch.empty(x.shape[:d] + (1,) + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        args = (out, x, cols)
        fused_kernel(grid=(x.numel() // cols,), block=(256,), args=args)
        return out
