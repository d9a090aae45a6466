"""Synthesized: hardtanh -> clamp (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 156576
DIM = 2048
CPU_SIZES = {"BATCH": 4936, "DIM": 256}


class Model(nn.Module):
    def __init__(self, limit: float, bound: float) -> None:
        super().__init__()
        self.limit = limit
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(x, -self.limit, self.limit)
        return torch.clamp(x, min=-self.bound, max=self.bound)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.74, 1.61]
