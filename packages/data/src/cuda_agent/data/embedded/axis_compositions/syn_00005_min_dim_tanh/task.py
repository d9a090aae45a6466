"""Synthesized: min_dim -> tanh (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 1024
D1 = 4096
D2 = 256
CPU_SIZES = {"BATCH": 256, "D1": 64, "D2": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.min(x, dim=1, keepdim=True)[0]
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
