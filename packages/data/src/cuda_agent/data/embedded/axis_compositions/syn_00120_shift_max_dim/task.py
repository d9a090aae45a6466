"""Synthesized: shift -> max_dim (2 operators); output shape (BATCH, 1)."""

import torch
from torch import nn

BATCH = 262144
DIM = 4096
CPU_SIZES = {"BATCH": 5776, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int, shift: float) -> None:
        super().__init__()
        self.dim = dim
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        return torch.max(x, dim=self.dim, keepdim=True)[0]


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1, -0.03]
