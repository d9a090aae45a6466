"""Synthesized: maximum -> clamp (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 102968
DIM = 8192
CPU_SIZES = {"BATCH": 4096, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.maximum(x, y)
        return torch.clamp(x, min=-self.bound, max=self.bound)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.36]
