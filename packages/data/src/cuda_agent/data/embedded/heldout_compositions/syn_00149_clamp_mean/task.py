"""Synthesized: clamp -> mean (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 107776
DIM = 8192
CPU_SIZES = {"BATCH": 6504, "DIM": 256}


class Model(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x, min=-self.bound, max=self.bound)
        return torch.mean(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.51]
