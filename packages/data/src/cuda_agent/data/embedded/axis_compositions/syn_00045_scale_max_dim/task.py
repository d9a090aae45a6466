"""Synthesized: scale -> max_dim (2 operators); output shape (BATCH, D1, 1)."""

import torch
from torch import nn

BATCH = 2048
D1 = 2048
D2 = 256
CPU_SIZES = {"BATCH": 176, "D1": 64, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        return torch.max(x, dim=self.dim, keepdim=True)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2, 1.97]
