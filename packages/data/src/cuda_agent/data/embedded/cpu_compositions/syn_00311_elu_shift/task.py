"""Synthesized: elu -> shift (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 626808
DIM = 1024
CPU_SIZES = {"BATCH": 1952, "DIM": 256}


class Model(nn.Module):
    def __init__(self, alpha: float, shift: float) -> None:
        super().__init__()
        self.alpha = alpha
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.elu(x, alpha=self.alpha)
        return x + self.shift


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.86, 0.45]
