import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# Tiled direct convolution: one block per 16 x 64 output tile of one (sample, channel) plane
# stages the input tile with its 1-pixel halo in shared memory (zeros outside the image), then
# each of the 256 threads computes 4 outputs down a column from it with the 9 weights in
# registers.
depthwise_conv2d = cuda_kernel(
    r"""
#define TH 16
#define TW 64

extern "C" __global__ void depthwise_conv2d(float* __restrict__ out, const float* __restrict__ x,
                                            const float* __restrict__ w,
                                            const float* __restrict__ b, int channels, int h,
                                            int wd) {
    __shared__ float tile[TH + 2][TW + 2];
    const long long plane = blockIdx.z;  // sample * channels + channel
    const int c = (int)(plane % channels);
    const int h0 = blockIdx.y * TH, w0 = blockIdx.x * TW;
    const float* xp = x + plane * h * wd;
    for (int i = threadIdx.x; i < (TH + 2) * (TW + 2); i += blockDim.x) {
        const int r = i / (TW + 2), q = i - r * (TW + 2);
        const int ih = h0 + r - 1, iw = w0 + q - 1;
        tile[r][q] = (ih >= 0 && ih < h && iw >= 0 && iw < wd) ? __ldg(xp + ih * wd + iw) : 0.f;
    }
    float k[9];
#pragma unroll
    for (int i = 0; i < 9; ++i) k[i] = __ldg(w + c * 9 + i);
    const float bias = __ldg(b + c);
    __syncthreads();

    const int tx = threadIdx.x % TW, ty = threadIdx.x / TW;  // 64 columns x 4 row groups
    const int ow = w0 + tx;
    float* op = out + plane * h * wd;
#pragma unroll
    for (int i = 0; i < TH / 4; ++i) {
        const int r = ty * (TH / 4) + i, oh = h0 + r;
        if (oh < h && ow < wd) {
            float acc = bias;
#pragma unroll
            for (int kh = 0; kh < 3; ++kh)
#pragma unroll
                for (int kw = 0; kw < 3; ++kw) acc = fmaf(k[kh * 3 + kw], tile[r + kh][tx + kw], acc);
            op[oh * wd + ow] = acc;
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
        depthwise_conv2d(
            grid=((wd + 63) // 64, (h + 15) // 16, batch * channels),
            block=(256,),
            args=(out, x, self.conv.weight, self.conv.bias, channels, h, wd),
        )
        return out
