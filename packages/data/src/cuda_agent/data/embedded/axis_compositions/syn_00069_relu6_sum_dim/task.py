"""Synthesized: relu6 -> sum_dim (2 operators); output shape (BATCH, D1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
D1 = 2048
D2 = 256
CPU_SIZES = {"BATCH": 32, "D1": 128, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int = 2) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(x)
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
