"""Synthesized: tanh -> abs (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 188928
DIM = 2048
CPU_SIZES = {"BATCH": 1800, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        return torch.abs(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
