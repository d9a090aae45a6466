"""Synthesized: relu -> mean_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 136
D1 = 4096
D2 = 1024
CPU_SIZES = {"BATCH": 216, "D1": 64, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        return torch.mean(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
