"""Synthesized: mean_dim -> exp (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 32768, "DIM": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=self.dim)
        return torch.exp(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
