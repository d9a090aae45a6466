"""Synthesized: l1_normalize_dim -> hardtanh (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1968
D1 = 1024
D2 = 512
CPU_SIZES = {"BATCH": 48, "D1": 32, "D2": 256}


class Model(nn.Module):
    def __init__(self, limit: float, dim: int = 2) -> None:
        super().__init__()
        self.limit = limit
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)
        return F.hardtanh(x, -self.limit, self.limit)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1.84]
