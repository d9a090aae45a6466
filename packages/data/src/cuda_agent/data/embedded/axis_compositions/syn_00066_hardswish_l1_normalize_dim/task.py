"""Synthesized: hardswish -> l1_normalize_dim (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 2096, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardswish(x)
        return x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
