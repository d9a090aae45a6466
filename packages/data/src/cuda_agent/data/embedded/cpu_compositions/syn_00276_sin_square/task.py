"""Synthesized: sin -> square (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 768904
DIM = 512
CPU_SIZES = {"BATCH": 7456, "DIM": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sin(x)
        return torch.square(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
