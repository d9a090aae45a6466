import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One block of 256 threads per row: strided partial sums, a shared-memory tree reduction, divide.
row_mean = cuda_kernel(
    r"""
extern "C" __global__ void row_mean(float* out, const float* x, int cols) {
    __shared__ float buf[256];
    const float* xr = x + (long long)blockIdx.x * cols;
    int t = threadIdx.x;

    float sum = 0.f;
    for (int j = t; j < cols; j += blockDim.x) sum += xr[j];
    buf[t] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0] / cols;
}
""",
    "row_mean",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        cols = x.shape[-1]
        row_mean(grid=(x.numel() // cols,), block=(256,), args=(out, x, cols))
        return out
