"""Synthesized: min_dim -> leaky_relu (2 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 64
D1 = 4096
D2 = 4096
CPU_SIZES = {"BATCH": 40, "D1": 128, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int, negative_slope: float) -> None:
        super().__init__()
        self.dim = dim
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.min(x, dim=self.dim)[0]
        return F.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.16]
