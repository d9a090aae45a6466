"""Synthesized: add -> norm_dim (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 1896, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x + y
        return torch.linalg.vector_norm(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
