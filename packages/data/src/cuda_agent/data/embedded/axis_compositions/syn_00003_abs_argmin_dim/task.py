"""Synthesized: abs -> argmin_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 2400
D1 = 512
D2 = 512
CPU_SIZES = {"BATCH": 32, "D1": 64, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.abs(x)
        return torch.argmin(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
