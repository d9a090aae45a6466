"""Synthesized: leaky_relu -> softmax_dim (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 16384, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int, negative_slope: float) -> None:
        super().__init__()
        self.dim = dim
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.leaky_relu(x, self.negative_slope)
        return torch.softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1, 0.09]
