"""Synthesized: max_dim -> gelu_tanh (2 operators); output shape (BATCH, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 16384, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max(x, dim=self.dim, keepdim=True)[0]
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
