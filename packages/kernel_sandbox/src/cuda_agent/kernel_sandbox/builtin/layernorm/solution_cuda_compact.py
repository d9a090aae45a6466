import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

layernorm_kernel = cuda_kernel(
    r"""
__device__ float block_sum(float v, float* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) buf[threadIdx.x] += buf[threadIdx.x + k];
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void layernorm_kernel(
        float* out, const float* x, const float* w, const float* b, int cols, float eps) {
    __shared__ float buf[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float* o = out + (long long)blockIdx.x * cols;
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += row[j];
    float mean = block_sum(s, buf) / cols;
    float q = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float d = row[j] - mean;
        q += d * d;
    }
    float rstd = rsqrtf(block_sum(q, buf) / cols + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) o[j] = (row[j] - mean) * rstd * w[j] + b[j];
}
""",
    "layernorm_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)  # holds the weight and bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        args = (out, x, self.norm.weight, self.norm.bias, cols, self.norm.eps)
        layernorm_kernel(grid=(x.numel() // cols,), block=(256,), args=args)
        return out
