"""Synthesized: mean_dim -> scale (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 16384
D1 = 256
D2 = 256
CPU_SIZES = {"BATCH": 24, "D1": 256, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=self.dim)
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.63]
