"""Clamp a 2-D tensor elementwise into [min_val, max_val] (torch.clamp)."""

import torch
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 64, "DIM": 4096}


class Model(nn.Module):
    def __init__(self, min_val: float, max_val: float) -> None:
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, self.min_val, self.max_val)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [-0.5, 0.5]
