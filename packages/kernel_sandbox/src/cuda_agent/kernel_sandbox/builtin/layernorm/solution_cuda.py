import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One block of 256 threads per row: a block-wide sum for the mean, another for the variance.
layernorm = cuda_kernel(
    r"""
__device__ float block_sum(float v, float* buf) {
    int t = threadIdx.x;
    buf[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    float total = buf[0];
    __syncthreads();  // buf is reused by the next call
    return total;
}

extern "C" __global__ void layernorm(float* out, const float* x, const float* w, const float* b,
                                     int cols, float eps) {
    __shared__ float buf[256];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = out + (long long)blockIdx.x * cols;
    int t = threadIdx.x;

    float sum = 0.f;
    for (int j = t; j < cols; j += blockDim.x) sum += xr[j];
    float mean = block_sum(sum, buf) / cols;

    float sq = 0.f;
    for (int j = t; j < cols; j += blockDim.x) sq += (xr[j] - mean) * (xr[j] - mean);
    float rstd = rsqrtf(block_sum(sq, buf) / cols + eps);

    for (int j = t; j < cols; j += blockDim.x) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
}
""",
    "layernorm",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)  # holds the weight and bias; the kernel does the compute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        layernorm(
            grid=(x.numel() // cols,),
            block=(256,),
            args=(out, x, self.norm.weight, self.norm.bias, cols, self.norm.eps),
        )
        return out
