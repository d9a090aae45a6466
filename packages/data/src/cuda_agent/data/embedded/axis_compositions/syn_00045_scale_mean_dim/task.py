"""Synthesized: scale -> mean_dim (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 112
D1 = 2048
D2 = 2048
CPU_SIZES = {"BATCH": 176, "D1": 64, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 3.46]
