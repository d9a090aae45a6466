"""Synthesized: relu6 -> max_dim (2 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 4096
D1 = 512
D2 = 512
CPU_SIZES = {"BATCH": 32, "D1": 512, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(x)
        return torch.max(x, dim=self.dim)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
