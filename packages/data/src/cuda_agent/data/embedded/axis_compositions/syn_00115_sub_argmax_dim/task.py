"""Synthesized: sub -> argmax_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 632
D1 = 256
D2 = 4096
CPU_SIZES = {"BATCH": 80, "D1": 128, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x - y
        return torch.argmax(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2), torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
