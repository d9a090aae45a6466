"""Synthesized: gelu -> sum_dim (2 operators); output shape (BATCH, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 1488, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(x)
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
