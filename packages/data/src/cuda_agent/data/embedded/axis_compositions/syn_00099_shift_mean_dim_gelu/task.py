"""Synthesized: shift -> mean_dim -> gelu (3 operators); output shape (BATCH, 1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 104
D1 = 2048
D2 = 2048
CPU_SIZES = {"BATCH": 32, "D1": 512, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int, shift: float) -> None:
        super().__init__()
        self.dim = dim
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.shift
        x = torch.mean(x, dim=self.dim, keepdim=True)
        return F.gelu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.93]
