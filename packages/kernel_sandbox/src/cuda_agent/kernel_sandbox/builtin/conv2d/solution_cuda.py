import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One thread per output pixel out[n, o, i, j]; w is [c_out, c_in, 3, 3], padding 1.
conv2d = cuda_kernel(
    r"""
extern "C" __global__ void conv2d(float* out, const float* x, const float* w, const float* b,
                                  int batch, int c_in, int c_out, int h, int wd) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= batch * c_out * h * wd) return;
    int j = idx % wd;
    int i = (idx / wd) % h;
    int o = (idx / (wd * h)) % c_out;
    int n = idx / (wd * h * c_out);

    float acc = b[o];
    for (int c = 0; c < c_in; ++c) {
        const float* xc = x + ((long long)n * c_in + c) * h * wd;
        const float* wc = w + (o * c_in + c) * 9;
        for (int di = 0; di < 3; ++di) {
            int ii = i + di - 1;
            if (ii < 0 || ii >= h) continue;
            for (int dj = 0; dj < 3; ++dj) {
                int jj = j + dj - 1;
                if (jj >= 0 && jj < wd) acc += wc[di * 3 + dj] * xc[ii * wd + jj];
            }
        }
    }
    out[idx] = acc;
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
        n = out.numel()
        conv2d(
            grid=((n + 255) // 256,),
            block=(256,),
            args=(out, x, w, b, batch, c_in, c_out, h, wd),
        )
        return out
