"""Synthesized: min_dim -> scale (2 operators); output shape (BATCH, D1, 1)."""

import torch
from torch import nn

BATCH = 256
D1 = 4096
D2 = 1024
CPU_SIZES = {"BATCH": 1024, "D1": 128, "D2": 32}


class Model(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.min(x, dim=self.dim, keepdim=True)[0]
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2, 2.18]
