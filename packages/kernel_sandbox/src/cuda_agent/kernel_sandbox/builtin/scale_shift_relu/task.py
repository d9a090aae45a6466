"""Scale and shift a 2-D tensor by scalars, then ReLU: relu(x * scale + shift)."""

import torch
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 64, "DIM": 4096}


class Model(nn.Module):
    def __init__(self, scale: float, shift: float) -> None:
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale + self.shift)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.5, -0.25]
