import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# Eval mode: y = (x - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] + bias[c].
batchnorm = cpu_kernel(
    r"""
#include <math.h>

void batchnorm(float* out, const float* x, const float* mean, const float* var,
               const float* w, const float* b, long batch, long channels, long length,
               float eps) {
    #pragma omp parallel for collapse(2)
    for (long n = 0; n < batch; ++n) {
        for (long c = 0; c < channels; ++c) {
            float scale = w[c] / sqrtf(var[c] + eps);
            float shift = b[c] - mean[c] * scale;
            long base = (n * channels + c) * length;
            for (long l = 0; l < length; ++l) out[base + l] = x[base + l] * scale + shift;
        }
    }
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
        batch, channels, length = x.shape
        bn = self.bn
        mean, var = bn.running_mean, bn.running_var
        batchnorm(out, x, mean, var, bn.weight, bn.bias, batch, channels, length, bn.eps)
        return out
