"""Synthesized: abs -> clamp (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 573328
DIM = 1024
CPU_SIZES = {"BATCH": 7792, "DIM": 256}


class Model(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.abs(x)
        return torch.clamp(x, min=-self.bound, max=self.bound)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.91]
