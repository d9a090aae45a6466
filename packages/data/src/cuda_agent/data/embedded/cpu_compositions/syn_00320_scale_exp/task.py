"""Synthesized: scale -> exp (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 420864
DIM = 1024
CPU_SIZES = {"BATCH": 2160, "DIM": 512}


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        return torch.exp(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [2.74]
