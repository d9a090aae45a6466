"""Synthesized: hardsigmoid -> clamp -> sum (3 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 976976
DIM = 512
CPU_SIZES = {"BATCH": 1584, "DIM": 512}


class Model(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardsigmoid(x)
        x = torch.clamp(x, min=-self.bound, max=self.bound)
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.9]
