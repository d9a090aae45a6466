"""Synthesized: sub -> norm_dim (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 1200
D1 = 512
D2 = 512
CPU_SIZES = {"BATCH": 128, "D1": 512, "D2": 64}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x - y
        return torch.linalg.vector_norm(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, D1, D2), torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
