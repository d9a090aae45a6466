"""Synthesized: mean_dim -> abs (2 operators); output shape (BATCH, D1)."""

import torch
from torch import nn

BATCH = 2048
D1 = 512
D2 = 1024
CPU_SIZES = {"BATCH": 32, "D1": 256, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int = 2) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=self.dim)
        return torch.abs(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
