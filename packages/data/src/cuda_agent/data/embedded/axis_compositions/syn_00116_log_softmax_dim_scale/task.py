"""Synthesized: log_softmax_dim -> scale (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 3064
D1 = 512
D2 = 256
CPU_SIZES = {"BATCH": 512, "D1": 32, "D2": 256}


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.log_softmax(x, dim=1)
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [3.54]
