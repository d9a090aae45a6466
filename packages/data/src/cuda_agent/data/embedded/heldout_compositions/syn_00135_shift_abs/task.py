"""Synthesized: shift -> abs (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 2720, "DIM": 256}


class Model(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        return torch.abs(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [-0.27]
