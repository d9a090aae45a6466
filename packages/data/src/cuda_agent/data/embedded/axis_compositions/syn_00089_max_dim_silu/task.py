"""Synthesized: max_dim -> silu (2 operators); output shape (BATCH, D1, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 128
D1 = 2048
D2 = 4096
CPU_SIZES = {"BATCH": 4096, "D1": 32, "D2": 32}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max(x, dim=2, keepdim=True)[0]
        return F.silu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
