"""Synthesized: mean -> hardtanh (2 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 131072
DIM = 8192
CPU_SIZES = {"BATCH": 8192, "DIM": 512}


class Model(nn.Module):
    def __init__(self, limit: float) -> None:
        super().__init__()
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=-1)
        return F.hardtanh(x, -self.limit, self.limit)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.7]
