"""Synthesized: l1_normalize_dim -> square (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 5776
D1 = 256
D2 = 512
CPU_SIZES = {"BATCH": 56, "D1": 32, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)
        return torch.square(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
