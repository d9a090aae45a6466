"""Synthesized: exp -> sigmoid (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 316720
DIM = 1024
CPU_SIZES = {"BATCH": 720, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.exp(x)
        return torch.sigmoid(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
