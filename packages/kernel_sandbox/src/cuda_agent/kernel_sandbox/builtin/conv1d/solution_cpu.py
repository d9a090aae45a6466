import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# w is [c_out, c_in, ks]; out[n, o, l] = b[o] + sum over (c, t) of w[o, c, t] * x[n, c, l + t].
conv1d = cpu_kernel(
    r"""
void conv1d(float* out, const float* x, const float* w, const float* b,
            long batch, long c_in, long c_out, long len, long ks) {
    long len_out = len - ks + 1;
    #pragma omp parallel for collapse(2)
    for (long n = 0; n < batch; ++n) {
        for (long o = 0; o < c_out; ++o) {
            float* y = out + (n * c_out + o) * len_out;
            for (long l = 0; l < len_out; ++l) y[l] = b[o];
            for (long c = 0; c < c_in; ++c) {
                const float* xc = x + (n * c_in + c) * len;
                const float* wc = w + (o * c_in + c) * ks;
                for (long t = 0; t < ks; ++t)
                    for (long l = 0; l < len_out; ++l) y[l] += wc[t] * xc[l + t];
            }
        }
    }
}
""",
    "conv1d",
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)  # holds w and b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, b = self.conv.weight, self.conv.bias
        batch, c_in, length = x.shape
        c_out, _, ks = w.shape
        out = torch.empty(batch, c_out, length - ks + 1, dtype=x.dtype, device=x.device)
        conv1d(out, x, w, b, batch, c_in, c_out, length, ks)
        return out
