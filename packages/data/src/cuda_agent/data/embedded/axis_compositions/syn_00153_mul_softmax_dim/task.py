"""Synthesized: mul -> softmax_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 592
D1 = 2048
D2 = 256
CPU_SIZES = {"BATCH": 112, "D1": 512, "D2": 64}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x * y
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, D1, D2), torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
