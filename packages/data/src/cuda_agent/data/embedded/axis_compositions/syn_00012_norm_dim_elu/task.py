"""Synthesized: norm_dim -> elu (2 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
D1 = 256
D2 = 2048
CPU_SIZES = {"BATCH": 64, "D1": 256, "D2": 256}


class Model(nn.Module):
    def __init__(self, alpha: float, dim: int = 1) -> None:
        super().__init__()
        self.alpha = alpha
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.linalg.vector_norm(x, dim=self.dim)
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [0.66]
