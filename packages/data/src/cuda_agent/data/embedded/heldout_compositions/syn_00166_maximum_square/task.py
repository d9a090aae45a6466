"""Synthesized: maximum -> square (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 36048
DIM = 8192
CPU_SIZES = {"BATCH": 584, "DIM": 2048}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.maximum(x, y)
        return torch.square(x)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
