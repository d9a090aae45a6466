import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# Memory-bound: each thread loads 4 float4s (all issued before any store, streaming cache
# hints) in a grid-stride loop sized so that one step covers the tensor; a scalar tail.
add_relu_mul = cuda_kernel(
    r"""
__device__ __forceinline__ float op(float a, float b, float c) {
    const float s = a + b;
    return (s > 0.f ? s : 0.f) * c;
}

extern "C" __global__ void add_relu_mul(
        float* __restrict__ out,
        const float* __restrict__ a,
        const float* __restrict__ b,
        const float* __restrict__ c,
        long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    // float4 part (none when a pointer is not 16-byte aligned), then a scalar tail
    const unsigned long long bits = (unsigned long long)out | (unsigned long long)a | (unsigned long long)b | (unsigned long long)c;
    const long long n4 = (bits & 15) ? 0 : n >> 2;
    for (long long i = tid; i < n4; i += 4 * stride) {
        float4 a4[4], b4[4], c4[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const long long j = i + u * stride;
            if (j < n4) {
                a4[u] = __ldcs(reinterpret_cast<const float4*>(a) + j);
                b4[u] = __ldcs(reinterpret_cast<const float4*>(b) + j);
                c4[u] = __ldcs(reinterpret_cast<const float4*>(c) + j);
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const long long j = i + u * stride;
            if (j < n4) {
                const float4 r = make_float4(
                    op(a4[u].x, b4[u].x, c4[u].x), op(a4[u].y, b4[u].y, c4[u].y),
                    op(a4[u].z, b4[u].z, c4[u].z), op(a4[u].w, b4[u].w, c4[u].w));
                __stcs(reinterpret_cast<float4*>(out) + j, r);
            }
        }
    }
    for (long long i = 4 * n4 + tid; i < n; i += stride) out[i] = op(a[i], b[i], c[i]);
}
""",
    "add_relu_mul",
)

# Many short blocks (no partial last wave of long ones); the loop strides past the cap.
_BLOCKS = 64 * torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        a, b, c = a.contiguous(), b.contiguous(), c.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_relu_mul(grid=(min(_BLOCKS, (n >> 12) + 1),), block=(256,), args=(out, a, b, c, n))
        return out
