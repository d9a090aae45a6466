import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

leaky_relu = cpu_kernel(
    r"""
void leaky_relu(float* out, const float* x, float negative_slope, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = v > 0.f ? v : negative_slope * v;
    }
}
""",
    "leaky_relu",
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        leaky_relu(out, x, self.negative_slope, x.numel())
        return out
