"""Synthesized: sub -> argmax_dim (2 operators); output shape (BATCH, D1)."""

import torch
from torch import nn

BATCH = 2048
D1 = 256
D2 = 2048
CPU_SIZES = {"BATCH": 40, "D1": 64, "D2": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x - y
        return torch.argmax(x, dim=2)


def get_inputs():
    return [torch.randn(BATCH, D1, D2), torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
