"""Synthesized: max_dim -> leaky_relu (2 operators); output shape (BATCH, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 1168, "DIM": 2048}


class Model(nn.Module):
    def __init__(self, negative_slope: float, dim: int = 1) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max(x, dim=self.dim, keepdim=True)[0]
        return F.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.25]
