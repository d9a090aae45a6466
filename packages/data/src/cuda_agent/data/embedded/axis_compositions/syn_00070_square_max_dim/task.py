"""Synthesized: square -> max_dim (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 8584, "DIM": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.square(x)
        return torch.max(x, dim=self.dim)[0]


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
