import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

row_sum_kernel = cuda_kernel(
    r"""
extern "C" __global__ void row_sum_kernel(float* out, const float* x, int cols) {
    __shared__ float part[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += row[j];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
""",
    "row_sum_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        row_sum_kernel(grid=(x.numel() // cols,), block=(256,), args=(out, x, cols))
        return out
