"""Synthesized: softplus -> mean_dim (2 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 256
D1 = 4096
D2 = 1024
CPU_SIZES = {"BATCH": 96, "D1": 64, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.softplus(x)
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
