"""Synthesized: softmax_dim -> exp (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 184
D1 = 1024
D2 = 2048
CPU_SIZES = {"BATCH": 552, "D1": 128, "D2": 32}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(x, dim=1)
        return torch.exp(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
