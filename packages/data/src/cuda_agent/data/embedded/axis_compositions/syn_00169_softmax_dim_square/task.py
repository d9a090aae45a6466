"""Synthesized: softmax_dim -> square (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 128
D1 = 4096
D2 = 2048
CPU_SIZES = {"BATCH": 48, "D1": 256, "D2": 128}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(x, dim=2)
        return torch.square(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
