"""Synthesized: sub -> softmax_dim (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 220648
DIM = 4096
CPU_SIZES = {"BATCH": 16384, "DIM": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x - y
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
