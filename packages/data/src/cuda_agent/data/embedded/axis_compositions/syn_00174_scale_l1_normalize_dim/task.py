"""Synthesized: scale -> l1_normalize_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 2048
D1 = 1024
D2 = 512
CPU_SIZES = {"BATCH": 48, "D1": 128, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        return x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.84]
