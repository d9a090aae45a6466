"""Synthesized: norm_dim -> selu (2 operators); output shape (BATCH, D1, 1)."""

import torch
from torch import nn

BATCH = 512
D1 = 2048
D2 = 1024
CPU_SIZES = {"BATCH": 1664, "D1": 32, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.linalg.vector_norm(x, dim=self.dim, keepdim=True)
        return torch.selu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
