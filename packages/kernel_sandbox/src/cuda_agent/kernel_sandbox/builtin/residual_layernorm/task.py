"""Residual add then layer normalization: LayerNorm(x + residual) over the last dimension."""

import torch
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 128, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM]
