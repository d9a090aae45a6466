"""Synthesized: minimum -> scale (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 86216
DIM = 4096
CPU_SIZES = {"BATCH": 2608, "DIM": 256}


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.minimum(x, y)
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [3.2]
