"""Synthesized: amin (1 operator); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 262144
DIM = 4096
CPU_SIZES = {"BATCH": 15896, "DIM": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amin(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
