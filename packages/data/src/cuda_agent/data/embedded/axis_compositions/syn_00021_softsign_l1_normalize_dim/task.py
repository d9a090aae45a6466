"""Synthesized: softsign -> l1_normalize_dim (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 131072
DIM = 8192
CPU_SIZES = {"BATCH": 10888, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.softsign(x)
        return x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
