"""Synthesized: mish -> max_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
D1 = 512
D2 = 1024
CPU_SIZES = {"BATCH": 72, "D1": 32, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.mish(x)
        return torch.max(x, dim=self.dim, keepdim=True)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
