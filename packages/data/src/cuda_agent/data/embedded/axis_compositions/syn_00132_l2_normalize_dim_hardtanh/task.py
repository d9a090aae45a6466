"""Synthesized: l2_normalize_dim -> hardtanh (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 145280
DIM = 2048
CPU_SIZES = {"BATCH": 16384, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int, limit: float) -> None:
        super().__init__()
        self.dim = dim
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.norm(x, p=2, dim=self.dim, keepdim=True)
        return F.hardtanh(x, -self.limit, self.limit)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1, 1.16]
