"""Synthesized: min_dim -> selu (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 256
D1 = 1024
D2 = 4096
CPU_SIZES = {"BATCH": 1944, "D1": 32, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.min(x, dim=self.dim, keepdim=True)[0]
        return torch.selu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
