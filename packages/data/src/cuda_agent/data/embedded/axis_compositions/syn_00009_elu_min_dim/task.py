"""Synthesized: elu -> min_dim (2 operators); output shape (BATCH, D1, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 512
D1 = 1024
D2 = 2048
CPU_SIZES = {"BATCH": 48, "D1": 256, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int, alpha: float) -> None:
        super().__init__()
        self.dim = dim
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.elu(x, alpha=self.alpha)
        return torch.min(x, dim=self.dim, keepdim=True)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2, 0.69]
