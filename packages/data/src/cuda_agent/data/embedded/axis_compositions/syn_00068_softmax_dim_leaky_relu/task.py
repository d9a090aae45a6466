"""Synthesized: softmax_dim -> leaky_relu (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 91840
DIM = 4096
CPU_SIZES = {"BATCH": 9128, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int, negative_slope: float) -> None:
        super().__init__()
        self.dim = dim
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(x, dim=self.dim)
        return F.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1, 0.09]
