"""Synthesized: minimum -> amax (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 1028912
DIM = 1024
CPU_SIZES = {"BATCH": 1304, "DIM": 512}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.minimum(x, y)
        return torch.amax(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
