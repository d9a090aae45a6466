"""Synthesized: softmax_dim -> relu (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 3224, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(x, dim=self.dim)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
