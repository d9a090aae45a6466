import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# Memory-bound: each thread loads 4 float4s (all issued before any store, streaming cache
# hints) in a grid-stride loop sized so that one step covers the tensor; a scalar tail.
silu = cuda_kernel(
    r"""
__device__ __forceinline__ float op(float x) {
    return x / (1.f + expf(-x));
}

extern "C" __global__ void silu(
        float* __restrict__ out,
        const float* __restrict__ x,
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
                    op(x4[u].x), op(x4[u].y),
                    op(x4[u].z), op(x4[u].w));
                __stcs(reinterpret_cast<float4*>(out) + j, r);
            }
        }
    }
    for (long long i = 4 * n4 + tid; i < n; i += stride) out[i] = op(x[i]);
}
""",
    "silu",
)

# Many short blocks (no partial last wave of long ones); the loop strides past the cap.
_BLOCKS = 64 * torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        silu(grid=(min(_BLOCKS, (n >> 12) + 1),), block=(256,), args=(out, x, n))
        return out
