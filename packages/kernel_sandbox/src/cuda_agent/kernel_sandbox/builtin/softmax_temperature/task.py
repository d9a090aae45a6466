"""Softmax with a temperature over the last dimension of a 2-D tensor: softmax(x / temperature)."""

import torch
from torch import nn

BATCH = 4096
DIM = 8192
CPU_SIZES = {"BATCH": 128, "DIM": 2048}


class Model(nn.Module):
    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x / self.temperature, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.7]
