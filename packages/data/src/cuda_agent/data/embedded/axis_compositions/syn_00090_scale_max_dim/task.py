"""Synthesized: scale -> max_dim (2 operators); output shape (BATCH, D1)."""

import torch
from torch import nn

BATCH = 512
D1 = 1024
D2 = 2048
CPU_SIZES = {"BATCH": 128, "D1": 256, "D2": 128}


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        return torch.max(x, dim=2)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2.34]
