"""Synthesized: leaky_relu -> norm_dim -> gelu (3 operators); output shape (BATCH, D1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 4096
D1 = 512
D2 = 512
CPU_SIZES = {"BATCH": 32, "D1": 64, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int, negative_slope: float) -> None:
        super().__init__()
        self.dim = dim
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.leaky_relu(x, self.negative_slope)
        x = torch.linalg.vector_norm(x, dim=self.dim)
        return F.gelu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2, 0.06]
