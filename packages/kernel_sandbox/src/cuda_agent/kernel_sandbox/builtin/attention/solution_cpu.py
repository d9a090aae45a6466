import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# One query row per iteration over all (batch * heads) slices: scores, softmax, weighted sum of V.
attention = cpu_kernel(
    r"""
#include <math.h>

void attention(float* out, const float* q, const float* k, const float* v,
               long bh, long s, long d, float scale) {
    #pragma omp parallel for collapse(2)
    for (long z = 0; z < bh; ++z) {
        for (long i = 0; i < s; ++i) {
            const float* qi = q + (z * s + i) * d;
            const float* kz = k + z * s * d;
            const float* vz = v + z * s * d;
            float* oi = out + (z * s + i) * d;
            float p[s];
            float m = -INFINITY;
            for (long j = 0; j < s; ++j) {
                float dot = 0.f;
                for (long e = 0; e < d; ++e) dot += qi[e] * kz[j * d + e];
                p[j] = dot * scale;
                m = fmaxf(m, p[j]);
            }
            float sum = 0.f;
            for (long j = 0; j < s; ++j) {
                p[j] = expf(p[j] - m);
                sum += p[j];
            }
            for (long e = 0; e < d; ++e) oi[e] = 0.f;
            for (long j = 0; j < s; ++j)
                for (long e = 0; e < d; ++e) oi[e] += p[j] * vz[j * d + e];
            for (long e = 0; e < d; ++e) oi[e] /= sum;
        }
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
        attention(out, q, k, v, q.numel() // (s * d), s, d, d**-0.5)
        return out
