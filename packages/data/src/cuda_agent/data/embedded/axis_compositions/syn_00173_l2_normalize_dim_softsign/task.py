"""Synthesized: l2_normalize_dim -> softsign (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 256
D1 = 2048
D2 = 2048
CPU_SIZES = {"BATCH": 12, "D1": 256, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.norm(x, p=2, dim=self.dim, keepdim=True)
        return F.softsign(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
