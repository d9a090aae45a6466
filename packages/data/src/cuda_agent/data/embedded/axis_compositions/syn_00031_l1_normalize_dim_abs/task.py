"""Synthesized: l1_normalize_dim -> abs (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 272
D1 = 512
D2 = 2048
CPU_SIZES = {"BATCH": 56, "D1": 32, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)
        return torch.abs(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
