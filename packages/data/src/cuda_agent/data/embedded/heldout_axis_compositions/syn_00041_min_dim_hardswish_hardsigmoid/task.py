"""Synthesized: min_dim -> hardswish -> hardsigmoid (3 operators); output shape (BATCH, 1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 512
D1 = 2048
D2 = 1024
CPU_SIZES = {"BATCH": 1320, "D1": 32, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.min(x, dim=self.dim, keepdim=True)[0]
        x = F.hardswish(x)
        return F.hardsigmoid(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
