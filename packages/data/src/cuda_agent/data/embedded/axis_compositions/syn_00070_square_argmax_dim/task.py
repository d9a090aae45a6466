"""Synthesized: square -> argmax_dim (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 16384, "DIM": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.square(x)
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
