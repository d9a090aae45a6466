"""Synthesized: minimum -> argmin_dim (2 operators); output shape (BATCH, 1)."""

import torch
from torch import nn

BATCH = 131072
DIM = 8192
CPU_SIZES = {"BATCH": 2048, "DIM": 2048}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.minimum(x, y)
        return torch.argmin(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
