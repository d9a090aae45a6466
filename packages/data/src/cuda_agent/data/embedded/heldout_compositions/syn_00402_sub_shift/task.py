"""Synthesized: sub -> shift (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 461424
DIM = 2048
CPU_SIZES = {"BATCH": 808, "DIM": 512}


class Model(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x - y
        return x + self.shift


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [-0.45]
