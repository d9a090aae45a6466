"""Synthesized: shift -> min_dim (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 232
D1 = 4096
D2 = 1024
CPU_SIZES = {"BATCH": 40, "D1": 512, "D2": 64}


class Model(nn.Module):
    def __init__(self, shift: float, dim: int = 1) -> None:
        super().__init__()
        self.shift = shift
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        return torch.min(x, dim=self.dim)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [-0.95]
