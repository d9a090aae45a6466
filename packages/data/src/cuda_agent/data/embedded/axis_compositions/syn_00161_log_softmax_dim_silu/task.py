"""Synthesized: log_softmax_dim -> silu (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 512
D1 = 1024
D2 = 2048
CPU_SIZES = {"BATCH": 776, "D1": 32, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.log_softmax(x, dim=self.dim)
        return F.silu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
