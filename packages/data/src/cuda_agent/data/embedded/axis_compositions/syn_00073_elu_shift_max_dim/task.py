"""Synthesized: elu -> shift -> max_dim (3 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 3544, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, dim: int, alpha: float, shift: float) -> None:
        super().__init__()
        self.dim = dim
        self.alpha = alpha
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.elu(x, alpha=self.alpha)
        x = x + self.shift
        return torch.max(x, dim=self.dim)[0]


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1, 1.31, -0.76]
