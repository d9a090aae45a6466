import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

linear_relu_kernel = cuda_kernel(
    r"""
#define T 16

extern "C" __global__ void linear_relu_kernel(
        float* out, const float* x, const float* w, const float* b, int M, int N, int K) {
    __shared__ float xs[T][T];
    __shared__ float ws[T][T + 1];
    int row = blockIdx.y * T + threadIdx.y;
    int col = blockIdx.x * T + threadIdx.x;
    int wrow = blockIdx.x * T + threadIdx.y;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        int k = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < M && k < K) ? x[(long long)row * K + k] : 0.f;
        ws[threadIdx.y][threadIdx.x] = (wrow < N && k < K) ? w[(long long)wrow * K + k] : 0.f;
        __syncthreads();
        for (int kk = 0; kk < T; ++kk) acc += xs[threadIdx.y][kk] * ws[threadIdx.x][kk];
        __syncthreads();
    }
    if (row < M && col < N) out[(long long)row * N + col] = fmaxf(acc + b[col], 0.f);
}
""",
    "linear_relu_kernel",
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # holds W and b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, b = self.linear.weight, self.linear.bias
        m, k = x.shape
        n = w.shape[0]
        out = torch.empty(m, n, dtype=x.dtype, device=x.device)
        grid = ((n + 15) // 16, (m + 15) // 16)
        linear_relu_kernel(grid=grid, block=(16, 16), args=(out, x, w, b, m, n, k))
        return out
