"""Synthesized: leaky_relu -> sum_dim (2 operators); output shape (BATCH, D1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
D1 = 2048
D2 = 256
CPU_SIZES = {"BATCH": 24, "D1": 128, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int, negative_slope: float) -> None:
        super().__init__()
        self.dim = dim
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.leaky_relu(x, self.negative_slope)
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2, 0.18]
