"""Synthesized: log_softmax_dim -> scale (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 8192
D1 = 512
D2 = 256
CPU_SIZES = {"BATCH": 224, "D1": 128, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.log_softmax(x, dim=self.dim)
        return x * self.scale


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 3.18]
