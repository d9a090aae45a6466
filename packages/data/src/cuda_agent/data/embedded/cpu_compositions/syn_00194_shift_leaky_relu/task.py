"""Synthesized: shift -> leaky_relu (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 400, "DIM": 2048}


class Model(nn.Module):
    def __init__(self, shift: float, negative_slope: float) -> None:
        super().__init__()
        self.shift = shift
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        return F.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.25, 0.02]
