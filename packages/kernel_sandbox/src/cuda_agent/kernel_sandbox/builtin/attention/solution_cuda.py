import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One block of 256 threads per query row: the row's scores live in dynamic shared memory
# (seq floats); block reductions give their max and sum; then each thread owns output columns.
attention = cuda_kernel(
    r"""
__device__ float block_max(float v, float* buf) {
    int t = threadIdx.x;
    buf[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] = fmaxf(buf[t], buf[t + s]);
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();  // buf is reused by the next call
    return r;
}

__device__ float block_sum(float v, float* buf) {
    int t = threadIdx.x;
    buf[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void attention(float* out, const float* q, const float* k, const float* v,
                                     int seq, int d, float scale) {
    extern __shared__ float p[];  // seq scores of this query row
    __shared__ float buf[256];
    long long row = blockIdx.x;  // (batch * heads) * seq + query index
    const float* qi = q + row * d;
    const float* kz = k + (row / seq) * seq * d;
    const float* vz = v + (row / seq) * seq * d;
    int t = threadIdx.x;

    float m = -3.402823466e38f;  // -FLT_MAX
    for (int j = t; j < seq; j += blockDim.x) {
        float dot = 0.f;
        for (int e = 0; e < d; ++e) dot += qi[e] * kz[j * d + e];
        p[j] = dot * scale;
        m = fmaxf(m, p[j]);
    }
    m = block_max(m, buf);

    float sum = 0.f;
    for (int j = t; j < seq; j += blockDim.x) {
        p[j] = expf(p[j] - m);
        sum += p[j];
    }
    float inv = 1.f / block_sum(sum, buf);  // its barriers also publish p to the whole block

    for (int e = t; e < d; e += blockDim.x) {
        float acc = 0.f;
        for (int j = 0; j < seq; ++j) acc += p[j] * vz[j * d + e];
        out[row * d + e] = acc * inv;
    }
}
""",
    "attention",
)


class ModelNew(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        s, d = q.shape[-2:]
        out = torch.empty_like(q)
        attention(
            grid=(q.numel() // d,),
            block=(256,),
            args=(out, q, k, v, s, d, d**-0.5),
            shared_mem=s * 4,
        )
        return out
