"""Synthesized: scale -> norm_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 16384
D1 = 256
D2 = 256
CPU_SIZES = {"BATCH": 192, "D1": 512, "D2": 32}


class Model(nn.Module):
    def __init__(self, scale: float, dim: int = 1) -> None:
        super().__init__()
        self.scale = scale
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        return torch.linalg.vector_norm(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [0.87]
