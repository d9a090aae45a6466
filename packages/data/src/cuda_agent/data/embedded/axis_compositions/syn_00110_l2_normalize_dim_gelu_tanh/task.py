"""Synthesized: l2_normalize_dim -> gelu_tanh (2 operators); output shape (BATCH, DIM)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 32768, "DIM": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.norm(x, p=2, dim=self.dim, keepdim=True)
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
