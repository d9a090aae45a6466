import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# w is [channels, 1, 3, 3]: channel c of the output sees only channel c of the input.
depthwise_conv2d = cpu_kernel(
    r"""
void depthwise_conv2d(float* out, const float* x, const float* w, const float* b,
                      long batch, long channels, long h, long wd) {
    #pragma omp parallel for collapse(2)
    for (long n = 0; n < batch; ++n) {
        for (long c = 0; c < channels; ++c) {
            const float* xc = x + (n * channels + c) * h * wd;
            const float* wc = w + c * 9;
            float* y = out + (n * channels + c) * h * wd;
            for (long i = 0; i < h; ++i) {
                for (long j = 0; j < wd; ++j) {
                    float acc = b[c];
                    for (long di = 0; di < 3; ++di) {
                        long ii = i + di - 1;
                        if (ii < 0 || ii >= h) continue;
                        for (long dj = 0; dj < 3; ++dj) {
                            long jj = j + dj - 1;
                            if (jj >= 0 && jj < wd) acc += wc[di * 3 + dj] * xc[ii * wd + jj];
                        }
                    }
                    y[i * wd + j] = acc;
                }
            }
        }
    }
}
""",
    "depthwise_conv2d",
)


class ModelNew(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        batch, channels, h, wd = x.shape
        depthwise_conv2d(out, x, self.conv.weight, self.conv.bias, batch, channels, h, wd)
        return out
