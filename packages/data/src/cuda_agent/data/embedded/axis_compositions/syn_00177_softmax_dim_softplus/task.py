"""Synthesized: softmax_dim -> softplus (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
D1 = 1024
D2 = 512
CPU_SIZES = {"BATCH": 96, "D1": 32, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(x, dim=self.dim)
        return F.softplus(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
