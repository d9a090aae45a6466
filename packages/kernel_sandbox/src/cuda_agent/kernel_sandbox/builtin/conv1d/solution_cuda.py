import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One thread per output element out[n, o, l]; w is [c_out, c_in, ks].
conv1d = cuda_kernel(
    r"""
extern "C" __global__ void conv1d(float* out, const float* x, const float* w, const float* b,
                                  int batch, int c_in, int c_out, int len, int ks) {
    int len_out = len - ks + 1;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= batch * c_out * len_out) return;
    int l = idx % len_out;
    int o = (idx / len_out) % c_out;
    int n = idx / (len_out * c_out);

    float acc = b[o];
    for (int c = 0; c < c_in; ++c) {
        const float* xc = x + ((long long)n * c_in + c) * len + l;
        const float* wc = w + ((long long)o * c_in + c) * ks;
        for (int t = 0; t < ks; ++t) acc += wc[t] * xc[t];
    }
    out[idx] = acc;
}
""",
    "conv1d",
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)  # holds w and b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, b = self.conv.weight, self.conv.bias
        batch, c_in, length = x.shape
        c_out, _, ks = w.shape
        out = torch.empty(batch, c_out, length - ks + 1, dtype=x.dtype, device=x.device)
        n = out.numel()
        conv1d(
            grid=((n + 255) // 256,),
            block=(256,),
            args=(out, x, w, b, batch, c_in, c_out, length, ks),
        )
        return out
