"""Synthesized: maximum -> argmin_dim (2 operators); output shape (BATCH, D1)."""

import torch
from torch import nn

BATCH = 1024
D1 = 4096
D2 = 256
CPU_SIZES = {"BATCH": 56, "D1": 128, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.maximum(x, y)
        return torch.argmin(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2), torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
