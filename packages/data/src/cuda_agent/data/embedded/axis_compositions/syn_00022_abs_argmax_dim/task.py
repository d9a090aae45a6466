"""Synthesized: abs -> argmax_dim (2 operators); output shape (BATCH, 1)."""

import torch
from torch import nn

BATCH = 452688
DIM = 2048
CPU_SIZES = {"BATCH": 10832, "DIM": 128}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.abs(x)
        return torch.argmax(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
