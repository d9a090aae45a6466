"""Synthesized: sin -> l1_normalize_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 1024
D1 = 2048
D2 = 512
CPU_SIZES = {"BATCH": 48, "D1": 128, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sin(x)
        return x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
