"""Synthesized: sum_dim -> softplus (2 operators); output shape (BATCH, D1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
D1 = 2048
D2 = 256
CPU_SIZES = {"BATCH": 2456, "D1": 32, "D2": 32}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sum(x, dim=2)
        return F.softplus(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
