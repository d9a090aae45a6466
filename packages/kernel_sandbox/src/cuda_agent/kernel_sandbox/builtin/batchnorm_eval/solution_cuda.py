import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One thread per element; the channel of element i in [N, C, L] is (i / L) % C.
batchnorm = cuda_kernel(
    r"""
extern "C" __global__ void batchnorm(float* out, const float* x, const float* mean,
                                     const float* var, const float* w, const float* b,
                                     int channels, int length, float eps, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int c = (int)((i / length) % channels);
    out[i] = (x[i] - mean[c]) * rsqrtf(var[c] + eps) * w[c] + b[c];
}
""",
    "batchnorm",
)


class ModelNew(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(channels)  # holds weight, bias and the running statistics

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        _, channels, length = x.shape
        n = x.numel()
        bn = self.bn
        mean, var = bn.running_mean, bn.running_var
        batchnorm(
            grid=((n + 255) // 256,),
            block=(256,),
            args=(out, x, mean, var, bn.weight, bn.bias, channels, length, bn.eps, n),
        )
        return out
