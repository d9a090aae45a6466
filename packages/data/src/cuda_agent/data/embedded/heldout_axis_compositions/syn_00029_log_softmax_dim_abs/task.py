"""Synthesized: log_softmax_dim -> abs (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 64
D1 = 4096
D2 = 1024
CPU_SIZES = {"BATCH": 3144, "D1": 32, "D2": 32}


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.log_softmax(x, dim=self.dim)
        return torch.abs(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
