"""Synthesized: sum_dim -> shift (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 8192
D1 = 256
D2 = 512
CPU_SIZES = {"BATCH": 2032, "D1": 32, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int, shift: float) -> None:
        super().__init__()
        self.dim = dim
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sum(x, dim=self.dim, keepdim=True)
        return x + self.shift


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, -0.77]
