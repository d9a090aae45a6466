"""Synthesized: maximum -> argmin_dim (2 operators); output shape (BATCH, D2)."""

import torch
from torch import nn

BATCH = 592
D1 = 256
D2 = 2048
CPU_SIZES = {"BATCH": 64, "D1": 64, "D2": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.maximum(x, y)
        return torch.argmin(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, D1, D2), torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
