"""Synthesized: sum_dim -> elu (2 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 8192, "DIM": 512}


class Model(nn.Module):
    def __init__(self, alpha: float, dim: int = 1) -> None:
        super().__init__()
        self.alpha = alpha
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sum(x, dim=self.dim)
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.44]
