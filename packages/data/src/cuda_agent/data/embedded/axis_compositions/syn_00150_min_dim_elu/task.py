"""Synthesized: min_dim -> elu (2 operators); output shape (BATCH, 1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 64
D1 = 4096
D2 = 4096
CPU_SIZES = {"BATCH": 128, "D1": 512, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int, alpha: float) -> None:
        super().__init__()
        self.dim = dim
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.min(x, dim=self.dim, keepdim=True)[0]
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 1.24]
