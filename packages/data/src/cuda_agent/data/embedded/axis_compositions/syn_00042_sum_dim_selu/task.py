"""Synthesized: sum_dim -> selu (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 512
D1 = 2048
D2 = 1024
CPU_SIZES = {"BATCH": 256, "D1": 64, "D2": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sum(x, dim=1)
        return torch.selu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
