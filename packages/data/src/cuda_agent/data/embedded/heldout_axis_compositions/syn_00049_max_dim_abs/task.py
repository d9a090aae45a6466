"""Synthesized: max_dim -> abs (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 1024
D1 = 1024
D2 = 1024
CPU_SIZES = {"BATCH": 200, "D1": 128, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max(x, dim=self.dim, keepdim=True)[0]
        return torch.abs(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
