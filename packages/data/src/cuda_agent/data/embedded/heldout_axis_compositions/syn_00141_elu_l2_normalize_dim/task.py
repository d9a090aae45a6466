"""Synthesized: elu -> l2_normalize_dim (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 16384, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int, alpha: float) -> None:
        super().__init__()
        self.dim = dim
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.elu(x, alpha=self.alpha)
        return x / torch.norm(x, p=2, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1, 0.7]
