"""Synthesized: silu -> mean_dim (2 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1128
D1 = 1024
D2 = 512
CPU_SIZES = {"BATCH": 160, "D1": 64, "D2": 64}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.silu(x)
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
