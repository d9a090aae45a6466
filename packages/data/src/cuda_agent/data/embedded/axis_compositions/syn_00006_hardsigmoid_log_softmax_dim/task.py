"""Synthesized: hardsigmoid -> log_softmax_dim (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 180456
DIM = 4096
CPU_SIZES = {"BATCH": 25336, "DIM": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardsigmoid(x)
        return torch.log_softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
