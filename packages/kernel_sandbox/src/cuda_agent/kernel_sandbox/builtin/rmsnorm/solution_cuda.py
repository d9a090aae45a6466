import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One block per row, one pass over global memory: float4 loads into a shared-memory copy of
# the row and a sum of squares (warp shuffles), then the scaled output from the copy.
rmsnorm = cuda_kernel(
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

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block (blockDim.x a multiple of 32), returned to every thread.
__device__ float block_sum(float v) {
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // part may still be read by the previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    return warp_sum(lane < (blockDim.x >> 5) ? part[lane] : 0.f);
}

__device__ __forceinline__ bool aligned16(const void* p) {
    return ((unsigned long long)p & 15) == 0;
}

template <int W>
__device__ void rmsnorm_row(float* yr, const float* xr, const float* w, float* cache, int cols,
                            float eps) {
    float sq = 0.f;
    for_each_chunk<W>(xr, cols, [&](int j, const float (&v)[W]) {
        if (cache) st<W>(cache + j, v);
#pragma unroll
        for (int i = 0; i < W; ++i) sq = fmaf(v[i], v[i], sq);
    });
    const float r = rsqrtf(block_sum(sq) / cols + eps);
    const float* src = cache ? cache : xr;  // this thread's own cached elements: no barrier
    for (int j = threadIdx.x * W; j < cols; j += blockDim.x * W) {
        float v[W], g[W];
        ld<W>(v, src + j);
        ld<W>(g, w + j);
#pragma unroll
        for (int i = 0; i < W; ++i) v[i] = v[i] * r * g[i];
        st<W>(yr + j, v);
    }
}

extern "C" __global__ void rmsnorm(float* out, const float* x, const float* w, int cols,
                                   float eps, int cache_row) {
    extern __shared__ float4 smem[];
    float* cache = cache_row ? reinterpret_cast<float*>(smem) : nullptr;
    const long long base = (long long)blockIdx.x * cols;
    const bool vec = (cols & 3) == 0 && aligned16(x) && aligned16(out) && aligned16(w);
    if (vec) rmsnorm_row<4>(out + base, x + base, w, cache, cols, eps);
    else rmsnorm_row<1>(out + base, x + base, w, cache, cols, eps);
}
""",
    "rmsnorm",
)


def _threads(cols: int) -> int:
    # About 4 floats per thread, in whole warps, at most 256 threads per row.
    return min(256, (cols + 127) // 128 * 32)


_CACHE_COLS = 12288  # rows up to 48 KB are kept in shared memory between passes


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)  # holds the weight; the kernel does the compute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        cached = cols <= _CACHE_COLS
        rmsnorm(
            grid=(x.numel() // cols,),
            block=(_threads(cols),),
            args=(out, x, self.norm.weight, cols, self.norm.eps, int(cached)),
            shared_mem=4 * cols if cached else 0,
        )
        return out
