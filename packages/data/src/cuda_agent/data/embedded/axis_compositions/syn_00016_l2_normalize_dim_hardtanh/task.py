"""Synthesized: l2_normalize_dim -> hardtanh (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 104
D1 = 4096
D2 = 2048
CPU_SIZES = {"BATCH": 24, "D1": 32, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int, limit: float) -> None:
        super().__init__()
        self.dim = dim
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.norm(x, p=2, dim=self.dim, keepdim=True)
        return F.hardtanh(x, -self.limit, self.limit)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.65]
