"""Synthesized: relu -> clamp (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 131072
DIM = 8192
CPU_SIZES = {"BATCH": 10960, "DIM": 256}


class Model(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        return torch.clamp(x, min=-self.bound, max=self.bound)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.59]
