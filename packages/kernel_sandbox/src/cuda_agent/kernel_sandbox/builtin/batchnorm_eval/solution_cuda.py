import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One block per (sample, channel) row: the channel's scale and shift are folded once, then
# a float4 streaming pass y = x * scale + shift.
batchnorm = cuda_kernel(
    r"""
template <int W>
__device__ __forceinline__ void ld(float (&v)[W], const float* p) {
    if constexpr (W == 4) {
        const float4 t = *reinterpret_cast<const float4*>(p);
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
        v[0] = *p;
    }
}

template <int W>
__device__ __forceinline__ void st(float* p, const float (&v)[W]) {
    if constexpr (W == 4) {
        *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
        *p = v[0];
    }
}

// Calls f(j, v) on this thread's W-wide chunks of a row in order, four loads in flight at a time.
template <int W, typename F>
__device__ __forceinline__ void for_each_chunk(const float* row, int cols, F f) {
    const int step = blockDim.x * W;
    int j = threadIdx.x * W;
    for (; j + 3 * step < cols; j += 4 * step) {
        float v[4][W];
#pragma unroll
        for (int u = 0; u < 4; ++u) ld<W>(v[u], row + j + u * step);
#pragma unroll
        for (int u = 0; u < 4; ++u) f(j + u * step, v[u]);
    }
    for (; j < cols; j += step) {
        float v[W];
        ld<W>(v, row + j);
        f(j, v);
    }
}

__device__ __forceinline__ bool aligned16(const void* p) {
    return ((unsigned long long)p & 15) == 0;
}

template <int W>
__device__ void affine_row(float* yr, const float* xr, int length, float scale, float shift) {
    for_each_chunk<W>(xr, length, [&](int j, const float (&v)[W]) {
        float y[W];
#pragma unroll
        for (int i = 0; i < W; ++i) y[i] = fmaf(v[i], scale, shift);
        st<W>(yr + j, y);
    });
}

extern "C" __global__ void batchnorm(float* out, const float* x, const float* mean,
                                     const float* var, const float* w, const float* b,
                                     int channels, int length, float eps) {
    const int c = blockIdx.x % channels;  // block = one (sample, channel) row of length L
    const float scale = w[c] * rsqrtf(var[c] + eps);
    const float shift = b[c] - mean[c] * scale;
    const long long base = (long long)blockIdx.x * length;
    if ((length & 3) == 0 && aligned16(x) && aligned16(out))
        affine_row<4>(out + base, x + base, length, scale, shift);
    else
        affine_row<1>(out + base, x + base, length, scale, shift);
}
""",
    "batchnorm",
)


def _threads(cols: int) -> int:
    # About 4 floats per thread, in whole warps, at most 256 threads per row.
    return min(256, (cols + 127) // 128 * 32)


class ModelNew(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(channels)  # holds weight, bias and the running statistics

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        _, channels, length = x.shape
        bn = self.bn
        batchnorm(
            grid=(x.numel() // length,),
            block=(_threads(length),),
            args=(
                out,
                x,
                bn.running_mean,
                bn.running_var,
                bn.weight,
                bn.bias,
                channels,
                length,
                bn.eps,
            ),
        )
        return out
