import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One block of 256 threads per row: a block-wide sum of squares, then one square root.
row_l2_norm = cuda_kernel(
    r"""
extern "C" __global__ void row_l2_norm(float* out, const float* x, int cols) {
    __shared__ float buf[256];
    const float* xr = x + (long long)blockIdx.x * cols;
    int t = threadIdx.x;

    float sq = 0.f;
    for (int j = t; j < cols; j += blockDim.x) sq += xr[j] * xr[j];
    buf[t] = sq;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sqrtf(buf[0]);
}
""",
    "row_l2_norm",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        cols = x.shape[-1]
        row_l2_norm(grid=(x.numel() // cols,), block=(256,), args=(out, x, cols))
        return out
