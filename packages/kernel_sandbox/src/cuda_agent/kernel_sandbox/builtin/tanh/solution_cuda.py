import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

tanh_act = cuda_kernel(
    r"""
extern "C" __global__ void tanh_act(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tanhf(x[i]);
}
""",
    "tanh_act",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        tanh_act(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        return out
