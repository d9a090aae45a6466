"""Synthesized: exp -> tanh (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 144872
DIM = 4096
CPU_SIZES = {"BATCH": 6752, "DIM": 128}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.exp(x)
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
