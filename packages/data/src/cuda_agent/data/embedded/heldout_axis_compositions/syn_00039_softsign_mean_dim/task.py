"""Synthesized: softsign -> mean_dim (2 operators); output shape (BATCH, D1, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 768
D1 = 2048
D2 = 512
CPU_SIZES = {"BATCH": 56, "D1": 128, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int = 2) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.softsign(x)
        return torch.mean(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
