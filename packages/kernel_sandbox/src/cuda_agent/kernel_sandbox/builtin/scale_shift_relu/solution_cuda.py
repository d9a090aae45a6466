import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# Memory-bound: each thread loads 4 float4s (all issued before any store, streaming cache
# hints) in a grid-stride loop sized so that one step covers the tensor; a scalar tail.
scale_shift_relu = cuda_kernel(
    r"""
__device__ __forceinline__ float op(float x, float scale, float shift) {
    const float y = x * scale + shift;
    return y > 0.f ? y : 0.f;
}

extern "C" __global__ void scale_shift_relu(
        float* __restrict__ out,
        const float* __restrict__ x,
        float scale,
        float shift,
        long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    // float4 part (none when a pointer is not 16-byte aligned), then a scalar tail
    const unsigned long long bits = (unsigned long long)out | (unsigned long long)x;
    const long long n4 = (bits & 15) ? 0 : n >> 2;
    for (long long i = tid; i < n4; i += 4 * stride) {
        float4 x4[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const long long j = i + u * stride;
            if (j < n4) {
                x4[u] = __ldcs(reinterpret_cast<const float4*>(x) + j);
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const long long j = i + u * stride;
            if (j < n4) {
                const float4 r = make_float4(
                    op(x4[u].x, scale, shift), op(x4[u].y, scale, shift),
                    op(x4[u].z, scale, shift), op(x4[u].w, scale, shift));
                __stcs(reinterpret_cast<float4*>(out) + j, r);
            }
        }
    }
    for (long long i = 4 * n4 + tid; i < n; i += stride) out[i] = op(x[i], scale, shift);
}
""",
    "scale_shift_relu",
)

# Many short blocks (no partial last wave of long ones); the loop strides past the cap.
_BLOCKS = 64 * torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


class ModelNew(nn.Module):
    def __init__(self, scale: float, shift: float) -> None:
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scale_shift_relu(
            grid=(min(_BLOCKS, (n >> 12) + 1),),
            block=(256,),
            args=(out, x, self.scale, self.shift, n),
        )
        return out
