"""Synthesized: selu -> l2_normalize_dim (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 262144
DIM = 4096
CPU_SIZES = {"BATCH": 6408, "DIM": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.selu(x)
        return x / torch.norm(x, p=2, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
