"""Synthesized: mish -> softmax_dim (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 42496
DIM = 8192
CPU_SIZES = {"BATCH": 2160, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.mish(x)
        return torch.softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
