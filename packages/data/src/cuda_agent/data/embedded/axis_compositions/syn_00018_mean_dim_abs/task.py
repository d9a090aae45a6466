"""Synthesized: mean_dim -> abs (2 operators); output shape (BATCH, 1)."""

import torch
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 2048, "DIM": 2048}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=self.dim, keepdim=True)
        return torch.abs(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
