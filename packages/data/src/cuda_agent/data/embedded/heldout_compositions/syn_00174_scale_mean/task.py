"""Synthesized: scale -> mean (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 501864
DIM = 1024
CPU_SIZES = {"BATCH": 3296, "DIM": 512}


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        return torch.mean(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.57]
