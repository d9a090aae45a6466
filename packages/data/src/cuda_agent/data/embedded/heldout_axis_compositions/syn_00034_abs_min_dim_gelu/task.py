"""Synthesized: abs -> min_dim -> gelu (3 operators); output shape (BATCH, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 118080
DIM = 4096
CPU_SIZES = {"BATCH": 7256, "DIM": 128}


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.abs(x)
        x = torch.min(x, dim=self.dim, keepdim=True)[0]
        return F.gelu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
