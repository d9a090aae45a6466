"""Synthesized: hardtanh -> norm_dim (2 operators); output shape (BATCH, D1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1616
D1 = 256
D2 = 1024
CPU_SIZES = {"BATCH": 512, "D1": 128, "D2": 64}


class Model(nn.Module):
    def __init__(self, limit: float, dim: int = 2) -> None:
        super().__init__()
        self.limit = limit
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(x, -self.limit, self.limit)
        return torch.linalg.vector_norm(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1.5]
