"""Synthesized: clamp -> sub (2 operators); output shape (BATCH, DIM)."""

import torch
from torch import nn

BATCH = 683576
DIM = 512
CPU_SIZES = {"BATCH": 336, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x, min=-self.bound, max=self.bound)
        return x - y


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.49]
