"""Synthesized: square -> abs (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 259296
DIM = 4096
CPU_SIZES = {"BATCH": 4096, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.square(x)
        return torch.abs(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
