import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# w is nn.Linear's weight, [f, f] row-major; the scale and the residual are fused in.
linear_scale_residual = cpu_kernel(
    r"""
void linear_scale_residual(float* out, const float* x, const float* w, const float* b,
                           float scale, long batch, long f) {
    #pragma omp parallel for
    for (long i = 0; i < batch; ++i) {
        const float* xi = x + i * f;
        for (long j = 0; j < f; ++j) {
            const float* wj = w + j * f;
            float acc = b[j];
            for (long k = 0; k < f; ++k) acc += xi[k] * wj[k];
            out[i * f + j] = acc * scale + xi[j];
        }
    }
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
        linear_scale_residual(out, x, self.linear.weight, self.linear.bias, self.scale, batch, f)
        return out
