import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# One linear kernel (x @ W.T + b, optional ReLU) launched once per layer.
linear = cpu_kernel(
    r"""
void linear(float* out, const float* x, const float* w, const float* b,
            long batch, long in_f, long out_f, int relu) {
    #pragma omp parallel for
    for (long i = 0; i < batch; ++i) {
        const float* xi = x + i * in_f;
        for (long j = 0; j < out_f; ++j) {
            const float* wj = w + j * in_f;
            float acc = b[j];
            for (long k = 0; k < in_f; ++k) acc += xi[k] * wj[k];
            out[i * out_f + j] = relu && acc < 0.f ? 0.f : acc;
        }
    }
}
""",
    "linear",
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)  # hold the weights; the kernels compute
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, in_f = x.shape
        hidden, out_f = self.fc1.out_features, self.fc2.out_features
        h = torch.empty(batch, hidden, dtype=x.dtype, device=x.device)
        out = torch.empty(batch, out_f, dtype=x.dtype, device=x.device)
        linear(h, x, self.fc1.weight, self.fc1.bias, batch, in_f, hidden, 1)
        linear(out, h, self.fc2.weight, self.fc2.bias, batch, hidden, out_f, 0)
        return out
