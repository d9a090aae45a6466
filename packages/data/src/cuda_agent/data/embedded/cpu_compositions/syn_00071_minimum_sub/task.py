"""Synthesized: minimum -> sub (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 127728
DIM = 8192
CPU_SIZES = {"BATCH": 2448, "DIM": 512}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x = torch.minimum(x, y)
        return x - z


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
