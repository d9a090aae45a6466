"""Synthesized: sub -> softmax_dim (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 461024
DIM = 1024
CPU_SIZES = {"BATCH": 16536, "DIM": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x - y
        return torch.softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
