"""Synthesized: shift -> mean_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 4096
D1 = 256
D2 = 1024
CPU_SIZES = {"BATCH": 48, "D1": 128, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int, shift: float) -> None:
        super().__init__()
        self.dim = dim
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        return torch.mean(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, -0.68]
