"""Synthesized: relu -> sum (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 641456
DIM = 1024
CPU_SIZES = {"BATCH": 4096, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
