"""Synthesized: hardswish -> shift (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 262144
DIM = 4096
CPU_SIZES = {"BATCH": 5648, "DIM": 512}


class Model(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardswish(x)
        return x + self.shift


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.33]
