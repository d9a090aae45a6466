"""Synthesized: norm_dim -> scale (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 256
D1 = 2048
D2 = 2048
CPU_SIZES = {"BATCH": 256, "D1": 256, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.linalg.vector_norm(x, dim=self.dim, keepdim=True)
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.82]
