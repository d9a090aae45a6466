"""Synthesized: sum_dim -> mish (2 operators); output shape (BATCH, D1, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 512
D1 = 1024
D2 = 2048
CPU_SIZES = {"BATCH": 128, "D1": 64, "D2": 512}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sum(x, dim=2, keepdim=True)
        return F.mish(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
