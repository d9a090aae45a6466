"""Synthesized: hardtanh -> leaky_relu -> scale (3 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 98224
DIM = 8192
CPU_SIZES = {"BATCH": 184, "DIM": 2048}


class Model(nn.Module):
    def __init__(self, limit: float, negative_slope: float, scale: float) -> None:
        super().__init__()
        self.limit = limit
        self.negative_slope = negative_slope
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(x, -self.limit, self.limit)
        x = F.leaky_relu(x, self.negative_slope)
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.58, 0.16, 1.35]
