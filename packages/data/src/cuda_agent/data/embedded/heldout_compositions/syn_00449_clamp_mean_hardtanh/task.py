"""Synthesized: clamp -> mean -> hardtanh (3 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 185600
DIM = 4096
CPU_SIZES = {"BATCH": 32768, "DIM": 128}


class Model(nn.Module):
    def __init__(self, bound: float, limit: float) -> None:
        super().__init__()
        self.bound = bound
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x, min=-self.bound, max=self.bound)
        x = torch.mean(x, dim=-1)
        return F.hardtanh(x, -self.limit, self.limit)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.61, 1.77]
