"""Synthesized: mul -> sum_dim (2 operators); output shape (BATCH, D1)."""

import torch
from torch import nn

BATCH = 40
D1 = 4096
D2 = 2048
CPU_SIZES = {"BATCH": 120, "D1": 64, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x * y
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2), torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
