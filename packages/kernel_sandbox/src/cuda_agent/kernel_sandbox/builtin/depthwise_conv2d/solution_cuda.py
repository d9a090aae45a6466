import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One thread per output pixel; w is [channels, 1, 3, 3], padding 1.
depthwise_conv2d = cuda_kernel(
    r"""
extern "C" __global__ void depthwise_conv2d(float* out, const float* x, const float* w,
                                            const float* b, int channels, int h, int wd,
                                            long long n_out) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_out) return;
    int j = idx % wd;
    int i = (idx / wd) % h;
    long long plane = idx / ((long long)h * wd);  // n * channels + c
    int c = plane % channels;
    const float* xc = x + plane * h * wd;
    const float* wc = w + c * 9;

    float acc = b[c];
    for (int di = 0; di < 3; ++di) {
        int ii = i + di - 1;
        if (ii < 0 || ii >= h) continue;
        for (int dj = 0; dj < 3; ++dj) {
            int jj = j + dj - 1;
            if (jj >= 0 && jj < wd) acc += wc[di * 3 + dj] * xc[ii * wd + jj];
        }
    }
    out[idx] = acc;
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
        _, channels, h, wd = x.shape
        n = out.numel()
        depthwise_conv2d(
            grid=((n + 255) // 256,),
            block=(256,),
            args=(out, x, self.conv.weight, self.conv.bias, channels, h, wd, n),
        )
        return out
