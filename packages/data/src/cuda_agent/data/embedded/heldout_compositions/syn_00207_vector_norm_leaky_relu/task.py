"""Synthesized: vector_norm -> leaky_relu (2 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 2048, "DIM": 2048}


class Model(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.linalg.vector_norm(x, dim=-1)
        return F.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.14]
