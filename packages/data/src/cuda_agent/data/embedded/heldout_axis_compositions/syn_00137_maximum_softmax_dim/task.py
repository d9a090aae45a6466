"""Synthesized: maximum -> softmax_dim (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 355816
DIM = 2048
CPU_SIZES = {"BATCH": 24984, "DIM": 128}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.maximum(x, y)
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
