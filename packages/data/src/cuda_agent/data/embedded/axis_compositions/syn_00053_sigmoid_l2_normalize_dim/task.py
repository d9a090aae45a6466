"""Synthesized: sigmoid -> l2_normalize_dim (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 3784, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sigmoid(x)
        return x / torch.norm(x, p=2, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
