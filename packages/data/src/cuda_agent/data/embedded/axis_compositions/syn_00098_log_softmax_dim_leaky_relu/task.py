"""Synthesized: log_softmax_dim -> leaky_relu (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
D1 = 256
D2 = 2048
CPU_SIZES = {"BATCH": 448, "D1": 32, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int, negative_slope: float) -> None:
        super().__init__()
        self.dim = dim
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.log_softmax(x, dim=self.dim)
        return F.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.18]
