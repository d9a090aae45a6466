"""Synthesized: sum_dim -> sin (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 512
D1 = 2048
D2 = 1024
CPU_SIZES = {"BATCH": 256, "D1": 32, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sum(x, dim=self.dim)
        return torch.sin(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
