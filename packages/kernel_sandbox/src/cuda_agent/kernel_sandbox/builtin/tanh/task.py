"""Hyperbolic tangent over a 2-D tensor."""

import torch
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 64, "DIM": 4096}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
