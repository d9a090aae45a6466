"""Synthesized: mean_dim -> clamp (2 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 11560, "DIM": 256}


class Model(nn.Module):
    def __init__(self, bound: float, dim: int = 1) -> None:
        super().__init__()
        self.bound = bound
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=self.dim)
        return torch.clamp(x, min=-self.bound, max=self.bound)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.91]
