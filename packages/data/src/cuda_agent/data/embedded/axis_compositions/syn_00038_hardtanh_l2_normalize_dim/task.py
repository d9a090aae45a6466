"""Synthesized: hardtanh -> l2_normalize_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 136
D1 = 2048
D2 = 1024
CPU_SIZES = {"BATCH": 4, "D1": 256, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int, limit: float) -> None:
        super().__init__()
        self.dim = dim
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(x, -self.limit, self.limit)
        return x / torch.norm(x, p=2, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 1.57]
