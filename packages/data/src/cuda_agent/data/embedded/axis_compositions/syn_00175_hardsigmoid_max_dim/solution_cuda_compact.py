import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

fused_kernel = cuda_kernel(
    r"""
#define INFINITY __int_as_float(0x7f800000)

extern "C" __global__ void fused_kernel(float* out, const float* x, long long outer, long long cols, long long inner) {
    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= outer * inner) return;
    long long first = o / inner * cols * inner + o % inner;  // the output's first
    double acc = -INFINITY;
    for (long long k = 0; k < cols; ++k) {
        long long i = first + k * inner;  // neighbouring threads: neighbouring i
        float v = x[i];
        v = fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;  // F.hardsigmoid(x)
        acc = fmax(acc, (double)v);  // torch.max(x, dim=self.dim, keepdim=True)[0]
    }
    float v = (float)(acc);
    out[o] = v;
}
""",
    "fused_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()  # the reduced axis
        outer, cols, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1 :].numel()
        out = torch.empty(x.shape[:d] + (1,) + x.shape[d + 1 :], dtype=x.dtype, device=x.device)
        args = (out, x, outer, cols, inner)
        fused_kernel(grid=((outer * inner + 255) // 256,), block=(256,), args=args)
        return out
