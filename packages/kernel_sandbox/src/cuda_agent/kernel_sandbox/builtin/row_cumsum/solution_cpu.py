import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

# Rows are independent (parallel); within a row the scan is sequential.
row_cumsum = cpu_kernel(
    r"""
void row_cumsum(float* out, const float* x, long rows, long cols) {
    #pragma omp parallel for
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        double acc = 0.0;  /* a double running sum, as torch's CPU cumsum */
        for (long j = 0; j < cols; ++j) {
            acc += xr[j];
            yr[j] = (float)acc;
        }
    }
}
""",
    "row_cumsum",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        row_cumsum(out, x, x.numel() // cols, cols)
        return out
