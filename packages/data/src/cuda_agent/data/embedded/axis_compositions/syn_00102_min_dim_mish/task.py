"""Synthesized: min_dim -> mish (2 operators); output shape (BATCH, D1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 64
D1 = 4096
D2 = 4096
CPU_SIZES = {"BATCH": 40, "D1": 128, "D2": 512}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.min(x, dim=2)[0]
        return F.mish(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
