"""Synthesized: tanh -> minimum (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 664, "DIM": 512}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        return torch.minimum(x, y)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
