import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

softmax_kernel = cuda_kernel(
    r"""
__device__ float block_reduce(float v, float* buf, bool is_max) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            float o = buf[threadIdx.x + k];
            buf[threadIdx.x] = is_max ? fmaxf(buf[threadIdx.x], o) : buf[threadIdx.x] + o;
        }
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_kernel(float* out, const float* x, int cols) {
    __shared__ float buf[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float* o = out + (long long)blockIdx.x * cols;
    float m = -3.4e38f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_reduce(m, buf, true);
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
    s = block_reduce(s, buf, false);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) o[j] = expf(row[j] - m) / s;
}
""",
    "softmax_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        softmax_kernel(grid=(x.numel() // cols,), block=(256,), args=(out, x, cols))
        return out
