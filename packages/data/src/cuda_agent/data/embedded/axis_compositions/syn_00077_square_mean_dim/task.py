"""Synthesized: square -> mean_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 1000
D1 = 1024
D2 = 1024
CPU_SIZES = {"BATCH": 424, "D1": 32, "D2": 64}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.square(x)
        return torch.mean(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
