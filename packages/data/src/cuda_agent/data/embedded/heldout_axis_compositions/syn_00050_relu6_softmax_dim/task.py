"""Synthesized: relu6 -> softmax_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 672
D1 = 512
D2 = 1024
CPU_SIZES = {"BATCH": 128, "D1": 256, "D2": 32}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(x)
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
