"""Synthesized: clamp -> vector_norm -> sin (3 operators); output shape (BATCH)."""

import torch
from torch import nn

BATCH = 695592
DIM = 1024
CPU_SIZES = {"BATCH": 16384, "DIM": 256}


class Model(nn.Module):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x, min=-self.bound, max=self.bound)
        x = torch.linalg.vector_norm(x, dim=-1)
        return torch.sin(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1.64]
