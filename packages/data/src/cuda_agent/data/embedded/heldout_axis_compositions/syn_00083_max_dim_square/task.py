"""Synthesized: max_dim -> square (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 8192
D1 = 512
D2 = 256
CPU_SIZES = {"BATCH": 2048, "D1": 32, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max(x, dim=self.dim, keepdim=True)[0]
        return torch.square(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
