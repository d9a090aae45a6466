"""Synthesized: maximum -> amin (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 262144
DIM = 4096
CPU_SIZES = {"BATCH": 1048, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.maximum(x, y)
        return torch.amin(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
