"""Synthesized: l1_normalize_dim -> relu6 (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 40
D1 = 4096
D2 = 2048
CPU_SIZES = {"BATCH": 240, "D1": 64, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)
        return F.relu6(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
