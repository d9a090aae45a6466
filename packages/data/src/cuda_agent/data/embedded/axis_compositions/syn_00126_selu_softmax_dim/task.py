"""Synthesized: selu -> softmax_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 256
D1 = 4096
D2 = 1024
CPU_SIZES = {"BATCH": 24, "D1": 256, "D2": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.selu(x)
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
