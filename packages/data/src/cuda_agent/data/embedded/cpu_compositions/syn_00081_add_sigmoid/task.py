"""Synthesized: add -> sigmoid (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 64864
DIM = 8192
CPU_SIZES = {"BATCH": 1184, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x + y
        return torch.sigmoid(x)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
