"""Synthesized: scale (1 operator); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 936, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [2.1]
