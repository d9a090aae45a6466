import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# w is [c_out, c_in, 3, 3]; taps that fall outside the image read the zero padding (skipped).
conv2d = cpu_kernel(
    r"""
void conv2d(float* out, const float* x, const float* w, const float* b,
            long batch, long c_in, long c_out, long h, long wd) {
    #pragma omp parallel for collapse(2)
    for (long n = 0; n < batch; ++n) {
        for (long o = 0; o < c_out; ++o) {
            float* y = out + (n * c_out + o) * h * wd;
            for (long i = 0; i < h; ++i) {
                for (long j = 0; j < wd; ++j) {
                    float acc = b[o];
                    for (long c = 0; c < c_in; ++c) {
                        const float* xc = x + (n * c_in + c) * h * wd;
                        const float* wc = w + (o * c_in + c) * 9;
                        for (long di = 0; di < 3; ++di) {
                            long ii = i + di - 1;
                            if (ii < 0 || ii >= h) continue;
                            for (long dj = 0; dj < 3; ++dj) {
                                long jj = j + dj - 1;
                                if (jj >= 0 && jj < wd) acc += wc[di * 3 + dj] * xc[ii * wd + jj];
                            }
                        }
                    }
                    y[i * wd + j] = acc;
                }
            }
        }
    }
}
""",
    "conv2d",
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)  # holds w, b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, b = self.conv.weight, self.conv.bias
        batch, c_in, h, wd = x.shape
        c_out = w.shape[0]
        out = torch.empty(batch, c_out, h, wd, dtype=x.dtype, device=x.device)
        conv2d(out, x, w, b, batch, c_in, c_out, h, wd)
        return out
