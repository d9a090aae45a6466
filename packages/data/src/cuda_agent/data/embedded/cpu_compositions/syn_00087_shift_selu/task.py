"""Synthesized: shift -> selu (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 165728
DIM = 2048
CPU_SIZES = {"BATCH": 6224, "DIM": 128}


class Model(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        return torch.selu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.64]
