"""Synthesized: mean -> scale (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 262144
DIM = 4096
CPU_SIZES = {"BATCH": 32768, "DIM": 128}


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=-1)
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [3.35]
