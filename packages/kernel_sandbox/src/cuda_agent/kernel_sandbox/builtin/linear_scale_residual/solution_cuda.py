import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One thread per output element: a dot product with a row of W, then scale and residual add.
linear_scale_residual = cuda_kernel(
    r"""
extern "C" __global__ void linear_scale_residual(float* out, const float* x, const float* w,
                                                 const float* b, float scale, int batch, int f) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= batch * f) return;
    int i = idx / f;
    int j = idx % f;
    const float* xi = x + (long long)i * f;
    const float* wj = w + (long long)j * f;
    float acc = b[j];
    for (int k = 0; k < f; ++k) acc += xi[k] * wj[k];
    out[idx] = acc * scale + xi[j];
}
""",
    "linear_scale_residual",
)


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)  # holds W and b
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, f = x.shape
        out = torch.empty_like(x)
        n = batch * f
        linear_scale_residual(
            grid=((n + 255) // 256,),
            block=(256,),
            args=(out, x, self.linear.weight, self.linear.bias, self.scale, batch, f),
        )
        return out
