import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

row_mean = cpu_kernel(
    r"""
void row_mean(float* out, const float* x, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        double sum = 0.0;  /* a double accumulator keeps the long sum accurate */
        for (long j = 0; j < cols; ++j) sum += xr[j];
        out[r] = (float)(sum / cols);
    }
}
""",
    "row_mean",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        cols = x.shape[-1]
        row_mean(out, x, x.numel() // cols, cols)
        return out
