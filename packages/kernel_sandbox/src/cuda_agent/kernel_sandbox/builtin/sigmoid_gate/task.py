"""Sigmoid gating: x * sigmoid(gate) elementwise over two 2-D tensors of the same shape."""

import torch
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 64, "DIM": 4096}


class Model(nn.Module):
    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(gate)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
