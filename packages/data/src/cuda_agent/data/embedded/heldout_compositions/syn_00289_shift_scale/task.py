"""Synthesized: shift -> scale (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 314704
DIM = 2048
CPU_SIZES = {"BATCH": 1008, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, shift: float, scale: float) -> None:
        super().__init__()
        self.shift = shift
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.63, 0.56]
