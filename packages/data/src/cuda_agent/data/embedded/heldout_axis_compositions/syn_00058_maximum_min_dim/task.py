"""Synthesized: maximum -> min_dim (2 operators); output shape (BATCH, 1)."""

import torch
from torch import nn

BATCH = 246968
DIM = 4096
CPU_SIZES = {"BATCH": 4872, "DIM": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.maximum(x, y)
        return torch.min(x, dim=1, keepdim=True)[0]


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
