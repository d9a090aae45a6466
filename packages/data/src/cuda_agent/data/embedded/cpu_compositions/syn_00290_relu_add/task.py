"""Synthesized: relu -> add (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 1147720
DIM = 512
CPU_SIZES = {"BATCH": 3072, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        return x + y


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
