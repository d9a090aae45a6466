"""Synthesized: exp -> clamp -> hardswish (3 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 167544
DIM = 2048
CPU_SIZES = {"BATCH": 22824, "DIM": 128}


class Model(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.exp(x)
        x = torch.clamp(x, min=-self.bound, max=self.bound)
        return F.hardswish(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.77]
