"""Synthesized: relu -> selu (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 131072
DIM = 8192
CPU_SIZES = {"BATCH": 1296, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        return torch.selu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
