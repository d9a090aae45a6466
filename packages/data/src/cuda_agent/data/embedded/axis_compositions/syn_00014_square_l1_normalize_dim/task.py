"""Synthesized: square -> l1_normalize_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 256
D1 = 2048
D2 = 2048
CPU_SIZES = {"BATCH": 120, "D1": 256, "D2": 128}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.square(x)
        return x / torch.mean(torch.abs(x), dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
