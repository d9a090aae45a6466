"""Synthesized: vector_norm -> sqrt (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 131072
DIM = 8192
CPU_SIZES = {"BATCH": 1808, "DIM": 2048}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.linalg.vector_norm(x, dim=-1)
        return torch.sqrt(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
