import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One block of 256 threads per row: a block-wide sum of squares, then scale the row.
l2_normalize = cuda_kernel(
    r"""
extern "C" __global__ void l2_normalize(float* out, const float* x, int cols) {
    __shared__ float buf[256];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = out + (long long)blockIdx.x * cols;
    int t = threadIdx.x;

    float sq = 0.f;
    for (int j = t; j < cols; j += blockDim.x) sq += xr[j] * xr[j];
    buf[t] = sq;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    float inv = 1.f / fmaxf(sqrtf(buf[0]), 1e-12f);

    for (int j = t; j < cols; j += blockDim.x) yr[j] = xr[j] * inv;
}
""",
    "l2_normalize",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        l2_normalize(grid=(x.numel() // cols,), block=(256,), args=(out, x, cols))
        return out
