import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One block of 256 threads per row. Each thread stores its strided share of x + residual in out,
# block sums give the mean and variance, and the same thread normalizes its elements in place.
residual_layernorm = cuda_kernel(
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

extern "C" __global__ void residual_layernorm(float* out, const float* x, const float* res,
                                              const float* w, const float* b, int cols,
                                              float eps) {
    __shared__ float buf[256];
    long long base = (long long)blockIdx.x * cols;
    float* yr = out + base;
    int t = threadIdx.x;

    float sum = 0.f;
    for (int j = t; j < cols; j += blockDim.x) {
        yr[j] = x[base + j] + res[base + j];
        sum += yr[j];
    }
    float mean = block_sum(sum, buf) / cols;

    float sq = 0.f;
    for (int j = t; j < cols; j += blockDim.x) sq += (yr[j] - mean) * (yr[j] - mean);
    float rstd = rsqrtf(block_sum(sq, buf) / cols + eps);

    for (int j = t; j < cols; j += blockDim.x) yr[j] = (yr[j] - mean) * rstd * w[j] + b[j];
}
""",
    "residual_layernorm",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)  # holds the weight and bias; the kernel does the compute

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x, residual = x.contiguous(), residual.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        n = self.norm
        residual_layernorm(
            grid=(x.numel() // cols,),
            block=(256,),
            args=(out, x, residual, n.weight, n.bias, cols, n.eps),
        )
        return out
