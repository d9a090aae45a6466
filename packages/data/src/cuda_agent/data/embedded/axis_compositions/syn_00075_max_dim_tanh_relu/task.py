"""Synthesized: max_dim -> tanh -> relu (3 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 16544, "DIM": 128}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max(x, dim=1)[0]
        x = torch.tanh(x)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
