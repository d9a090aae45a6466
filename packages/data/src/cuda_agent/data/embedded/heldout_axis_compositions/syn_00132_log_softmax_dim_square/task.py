"""Synthesized: log_softmax_dim -> square (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 2488
D1 = 512
D2 = 512
CPU_SIZES = {"BATCH": 256, "D1": 32, "D2": 512}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.log_softmax(x, dim=2)
        return torch.square(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
