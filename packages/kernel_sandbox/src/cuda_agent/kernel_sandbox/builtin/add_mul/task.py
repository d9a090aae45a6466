"""Elementwise (a + b) * c over three 2-D tensors of the same shape."""

import torch
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 64, "DIM": 4096}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (a + b) * c


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
