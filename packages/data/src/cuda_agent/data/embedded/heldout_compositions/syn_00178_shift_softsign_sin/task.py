"""Synthesized: shift -> softsign -> sin (3 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 934152
DIM = 512
CPU_SIZES = {"BATCH": 3912, "DIM": 128}


class Model(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        x = F.softsign(x)
        return torch.sin(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.89]
