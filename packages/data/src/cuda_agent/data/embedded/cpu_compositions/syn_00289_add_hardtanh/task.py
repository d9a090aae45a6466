"""Synthesized: add -> hardtanh (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 853408
DIM = 512
CPU_SIZES = {"BATCH": 1320, "DIM": 256}


class Model(nn.Module):
    def __init__(self, limit: float) -> None:
        super().__init__()
        self.limit = limit

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x + y
        return F.hardtanh(x, -self.limit, self.limit)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.2]
