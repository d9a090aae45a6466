"""Synthesized: log_softmax_dim -> softsign (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 262144
DIM = 4096
CPU_SIZES = {"BATCH": 464, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.log_softmax(x, dim=self.dim)
        return F.softsign(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
