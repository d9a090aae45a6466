"""Synthesized: hardtanh -> sum_dim (2 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1024
D1 = 1024
D2 = 1024
CPU_SIZES = {"BATCH": 352, "D1": 128, "D2": 32}


class Model(nn.Module):
    def __init__(self, dim: int, limit: float) -> None:
        super().__init__()
        self.dim = dim
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(x, -self.limit, self.limit)
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 1.61]
