"""Synthesized: sin -> mean_dim (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 4096
D1 = 1024
D2 = 256
CPU_SIZES = {"BATCH": 16, "D1": 256, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sin(x)
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
