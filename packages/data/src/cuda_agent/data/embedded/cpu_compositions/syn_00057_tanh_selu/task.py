"""Synthesized: tanh -> selu (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 670656
DIM = 1024
CPU_SIZES = {"BATCH": 520, "DIM": 2048}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        return torch.selu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
