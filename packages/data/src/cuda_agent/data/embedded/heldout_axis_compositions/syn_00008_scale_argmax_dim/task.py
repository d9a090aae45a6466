"""Synthesized: scale -> argmax_dim (2 operators); output shape (BATCH, D1)."""

import torch
from torch import nn

BATCH = 168
D1 = 4096
D2 = 1024
CPU_SIZES = {"BATCH": 48, "D1": 256, "D2": 64}


class Model(nn.Module):
    def __init__(self, scale: float, dim: int = 2) -> None:
        super().__init__()
        self.scale = scale
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        return torch.argmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2.58]
