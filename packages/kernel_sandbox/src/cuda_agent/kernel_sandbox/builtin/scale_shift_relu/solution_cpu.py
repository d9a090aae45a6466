import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

scale_shift_relu = cpu_kernel(
    r"""
void scale_shift_relu(float* out, const float* x, float scale, float shift, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float y = x[i] * scale + shift;
        out[i] = y > 0.f ? y : 0.f;
    }
}
""",
    "scale_shift_relu",
)


class ModelNew(nn.Module):
    def __init__(self, scale: float, shift: float) -> None:
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        scale_shift_relu(out, x, self.scale, self.shift, x.numel())
        return out
