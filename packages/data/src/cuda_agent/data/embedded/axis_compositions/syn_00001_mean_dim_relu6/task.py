"""Synthesized: mean_dim -> relu6 (2 operators); output shape (BATCH, D1, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 16384
D1 = 256
D2 = 256
CPU_SIZES = {"BATCH": 24, "D1": 256, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=self.dim, keepdim=True)
        return F.relu6(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
