"""Synthesized: min_dim -> square (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 128
D1 = 2048
D2 = 4096
CPU_SIZES = {"BATCH": 512, "D1": 128, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.min(x, dim=self.dim)[0]
        return torch.square(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
