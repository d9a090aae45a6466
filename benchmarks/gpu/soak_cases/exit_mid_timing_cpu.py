# Fault: an honest relu that ends its process (_exit, from C: no Python cleanup, and out of the
# static checks' sight) on its __EXIT_AT__th call, which the soak places inside the timing.
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

relu = cpu_kernel(
    r"""
#include <unistd.h>
static long calls = 0;
void relu(float* out, const float* x, long n) {
    if (++calls == __EXIT_AT__) _exit(3);
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
}
""",
    "relu",
)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu(out, x, x.numel())
        return out
