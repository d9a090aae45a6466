"""Synthesized: shift -> min_dim (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 512
D1 = 512
D2 = 4096
CPU_SIZES = {"BATCH": 40, "D1": 128, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int, shift: float) -> None:
        super().__init__()
        self.dim = dim
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        return torch.min(x, dim=self.dim)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, -0.54]
