"""Synthesized: minimum -> softmax_dim (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 437584
DIM = 512
CPU_SIZES = {"BATCH": 1872, "DIM": 2048}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.minimum(x, y)
        return torch.softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
