"""Synthesized: sin -> norm_dim (2 operators); output shape (BATCH, 1)."""

import torch
from torch import nn

BATCH = 138960
DIM = 4096
CPU_SIZES = {"BATCH": 312, "DIM": 2048}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sin(x)
        return torch.linalg.vector_norm(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
