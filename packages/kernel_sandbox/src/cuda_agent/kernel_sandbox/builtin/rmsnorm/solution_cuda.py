import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One block of 256 threads per row: a block-wide sum of squares, then scale by rsqrt and weight.
rmsnorm = cuda_kernel(
    r"""
extern "C" __global__ void rmsnorm(float* out, const float* x, const float* w, int cols,
                                   float eps) {
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
    float rms_inv = rsqrtf(buf[0] / cols + eps);

    for (int j = t; j < cols; j += blockDim.x) yr[j] = xr[j] * rms_inv * w[j];
}
""",
    "rmsnorm",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)  # holds the weight; the kernel does the compute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        rmsnorm(
            grid=(x.numel() // cols,),
            block=(256,),
            args=(out, x, self.norm.weight, cols, self.norm.eps),
        )
        return out
