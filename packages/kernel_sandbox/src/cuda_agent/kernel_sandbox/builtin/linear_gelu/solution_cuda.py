import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One thread per output element (bias and exact GELU fused in); w is [out_f, in_f] row-major.
linear_gelu = cuda_kernel(
    r"""
extern "C" __global__ void linear_gelu(float* out, const float* x, const float* w, const float* b,
                                       int batch, int in_f, int out_f) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= batch * out_f) return;
    int i = idx / out_f;
    int j = idx % out_f;
    const float* xi = x + (long long)i * in_f;
    const float* wj = w + (long long)j * in_f;
    float acc = b[j];
    for (int k = 0; k < in_f; ++k) acc += xi[k] * wj[k];
    out[idx] = 0.5f * acc * (1.f + erff(acc * 0.70710678f));  // x * Phi(x)
}
""",
    "linear_gelu",
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # holds W and b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, b = self.linear.weight, self.linear.bias
        batch, in_f = x.shape
        out_f = w.shape[0]
        out = torch.empty(batch, out_f, dtype=x.dtype, device=x.device)
        n = batch * out_f
        linear_gelu(grid=((n + 255) // 256,), block=(256,), args=(out, x, w, b, batch, in_f, out_f))
        return out
