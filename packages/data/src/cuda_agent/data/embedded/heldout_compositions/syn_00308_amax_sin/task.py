"""Synthesized: amax -> sin (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 2048, "DIM": 2048}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.amax(x, dim=-1)
        return torch.sin(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
