"""Synthesized: softmax_dim -> sin (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 384
D1 = 4096
D2 = 512
CPU_SIZES = {"BATCH": 56, "D1": 512, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(x, dim=self.dim)
        return torch.sin(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
