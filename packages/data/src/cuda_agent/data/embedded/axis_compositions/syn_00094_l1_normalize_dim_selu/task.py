"""Synthesized: l1_normalize_dim -> selu (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 128
D1 = 2048
D2 = 4096
CPU_SIZES = {"BATCH": 32, "D1": 256, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)
        return torch.selu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
