"""Leaky ReLU over a 2-D tensor: x if x > 0 else negative_slope * x."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 64, "DIM": 4096}


class Model(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.01]
