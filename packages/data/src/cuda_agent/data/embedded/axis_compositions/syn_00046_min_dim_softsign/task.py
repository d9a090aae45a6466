"""Synthesized: min_dim -> softsign (2 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 32768, "DIM": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.min(x, dim=self.dim)[0]
        return F.softsign(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
