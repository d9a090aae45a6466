"""Synthesized: sigmoid -> clamp (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 131072
DIM = 8192
CPU_SIZES = {"BATCH": 1096, "DIM": 512}


class Model(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sigmoid(x)
        return torch.clamp(x, min=-self.bound, max=self.bound)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.13]
