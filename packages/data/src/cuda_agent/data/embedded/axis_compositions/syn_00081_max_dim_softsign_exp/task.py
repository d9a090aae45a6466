"""Synthesized: max_dim -> softsign -> exp (3 operators); output shape (BATCH, D1, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1024
D1 = 1024
D2 = 1024
CPU_SIZES = {"BATCH": 256, "D1": 32, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max(x, dim=self.dim, keepdim=True)[0]
        x = F.softsign(x)
        return torch.exp(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
