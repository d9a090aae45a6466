"""Synthesized: minimum -> min_dim (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 1584
D1 = 1024
D2 = 512
CPU_SIZES = {"BATCH": 15, "D1": 128, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.minimum(x, y)
        return torch.min(x, dim=self.dim)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2), torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
