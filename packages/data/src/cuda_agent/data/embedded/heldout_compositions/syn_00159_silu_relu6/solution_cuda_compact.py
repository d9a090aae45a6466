import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
extern "C" __global__ void fused_kernel(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    v = v / (1.f + expf(-v));  // F.silu(x)
    v = fminf(fmaxf(v, 0.f), 6.f);  // F.relu6(x)
    out[i] = v;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        args = (out, x, n)
        fused_kernel(grid=((n + 255) // 256,), block=(256,), args=args)
        return out
