"""Synthesized: elu -> min_dim (2 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 256920
DIM = 2048
CPU_SIZES = {"BATCH": 2520, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int, alpha: float) -> None:
        super().__init__()
        self.dim = dim
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.elu(x, alpha=self.alpha)
        return torch.min(x, dim=self.dim)[0]


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1, 1.43]
