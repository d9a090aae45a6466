"""Synthesized: sin -> sum_dim (2 operators); output shape (BATCH, D1)."""

import torch
from torch import nn

BATCH = 1328
D1 = 512
D2 = 1024
CPU_SIZES = {"BATCH": 1024, "D1": 128, "D2": 32}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sin(x)
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
