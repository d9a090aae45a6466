"""Synthesized: mean_dim -> gelu (2 operators); output shape (BATCH, D1, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
D1 = 2048
D2 = 256
CPU_SIZES = {"BATCH": 1024, "D1": 64, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=self.dim, keepdim=True)
        return F.gelu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
