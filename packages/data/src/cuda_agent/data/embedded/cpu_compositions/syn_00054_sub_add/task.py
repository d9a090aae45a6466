"""Synthesized: sub -> add (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 76640
DIM = 8192
CPU_SIZES = {"BATCH": 5304, "DIM": 128}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x = x - y
        return x + z


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
