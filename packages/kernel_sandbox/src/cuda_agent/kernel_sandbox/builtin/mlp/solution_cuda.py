import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

# One linear kernel (one thread per output, optional ReLU) launched once per layer.
linear = cuda_kernel(
    r"""
extern "C" __global__ void linear(float* out, const float* x, const float* w, const float* b,
                                  int batch, int in_f, int out_f, int relu) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= batch * out_f) return;
    int i = idx / out_f;
    int j = idx % out_f;
    const float* xi = x + (long long)i * in_f;
    const float* wj = w + (long long)j * in_f;
    float acc = b[j];
    for (int k = 0; k < in_f; ++k) acc += xi[k] * wj[k];
    out[idx] = relu && acc < 0.f ? 0.f : acc;
}
""",
    "linear",
)


def _linear(x: torch.Tensor, layer: nn.Linear, relu: bool) -> torch.Tensor:
    batch, in_f = x.shape
    out_f = layer.out_features
    out = torch.empty(batch, out_f, dtype=x.dtype, device=x.device)
    n = batch * out_f
    linear(
        grid=((n + 255) // 256,),
        block=(256,),
        args=(out, x, layer.weight, layer.bias, batch, in_f, out_f, int(relu)),
    )
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)  # hold the weights; the kernels compute
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _linear(_linear(x.contiguous(), self.fc1, relu=True), self.fc2, relu=False)
