"""Synthesized: hardsigmoid -> max_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1024
D1 = 512
D2 = 2048
CPU_SIZES = {"BATCH": 360, "D1": 128, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardsigmoid(x)
        return torch.max(x, dim=self.dim, keepdim=True)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
