import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# w is nn.Linear's weight, [out_f, in_f] row-major: each output is a dot product of two rows.
linear_gelu = cpu_kernel(
    r"""
#include <math.h>

void linear_gelu(float* out, const float* x, const float* w, const float* b,
                 long batch, long in_f, long out_f) {
    #pragma omp parallel for
    for (long i = 0; i < batch; ++i) {
        const float* xi = x + i * in_f;
        for (long j = 0; j < out_f; ++j) {
            const float* wj = w + j * in_f;
            float acc = b[j];
            for (long k = 0; k < in_f; ++k) acc += xi[k] * wj[k];
            out[i * out_f + j] = 0.5f * acc * (1.f + erff(acc * 0.70710678f));
        }
    }
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
        linear_gelu(out, x, w, b, batch, in_f, out_f)
        return out
