"""Cumulative sum along the last dimension of a 2-D tensor (torch.cumsum(x, dim=-1))."""

import torch
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 128, "DIM": 1024}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
