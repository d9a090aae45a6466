"""Synthesized: l2_normalize_dim -> relu (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 3168
D1 = 512
D2 = 256
CPU_SIZES = {"BATCH": 7, "D1": 512, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.norm(x, p=2, dim=self.dim, keepdim=True)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
