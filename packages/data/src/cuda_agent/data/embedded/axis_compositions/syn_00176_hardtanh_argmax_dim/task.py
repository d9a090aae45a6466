"""Synthesized: hardtanh -> argmax_dim (2 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 64
D1 = 4096
D2 = 4096
CPU_SIZES = {"BATCH": 16, "D1": 128, "D2": 512}


class Model(nn.Module):
    def __init__(self, limit: float, dim: int = 1) -> None:
        super().__init__()
        self.limit = limit
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(x, -self.limit, self.limit)
        return torch.argmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1.38]
