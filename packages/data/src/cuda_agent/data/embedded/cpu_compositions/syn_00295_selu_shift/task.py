"""Synthesized: selu -> shift (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 1022584
DIM = 512
CPU_SIZES = {"BATCH": 2504, "DIM": 512}


class Model(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.selu(x)
        return x + self.shift


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [-0.83]
