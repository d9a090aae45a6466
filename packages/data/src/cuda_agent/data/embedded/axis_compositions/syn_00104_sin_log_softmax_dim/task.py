"""Synthesized: sin -> log_softmax_dim (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 1976, "DIM": 512}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sin(x)
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
