"""Synthesized: hardsigmoid -> add -> sigmoid (3 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 739712
DIM = 1024
CPU_SIZES = {"BATCH": 3896, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = F.hardsigmoid(x)
        x = x + y
        return torch.sigmoid(x)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
