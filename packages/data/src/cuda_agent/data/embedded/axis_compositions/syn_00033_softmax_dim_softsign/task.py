"""Synthesized: softmax_dim -> softsign (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1024
D1 = 512
D2 = 2048
CPU_SIZES = {"BATCH": 8, "D1": 512, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(x, dim=self.dim)
        return F.softsign(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
