"""Synthesized: selu -> mean_dim (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 48
D1 = 4096
D2 = 2048
CPU_SIZES = {"BATCH": 664, "D1": 64, "D2": 32}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.selu(x)
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
