"""Synthesized: abs -> sqrt (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 2048592
DIM = 512
CPU_SIZES = {"BATCH": 912, "DIM": 512}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.abs(x)
        return torch.sqrt(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
