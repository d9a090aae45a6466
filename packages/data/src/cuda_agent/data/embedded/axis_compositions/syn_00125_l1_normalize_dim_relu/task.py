"""Synthesized: l1_normalize_dim -> relu (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 248
D1 = 4096
D2 = 512
CPU_SIZES = {"BATCH": 368, "D1": 64, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int = 2) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
