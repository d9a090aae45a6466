"""Synthesized: shift -> l1_normalize_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 1224
D1 = 512
D2 = 512
CPU_SIZES = {"BATCH": 32, "D1": 32, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int, shift: float) -> None:
        super().__init__()
        self.dim = dim
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        return x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.87]
