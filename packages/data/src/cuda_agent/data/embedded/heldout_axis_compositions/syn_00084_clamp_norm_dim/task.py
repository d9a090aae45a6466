"""Synthesized: clamp -> norm_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 256
D1 = 1024
D2 = 4096
CPU_SIZES = {"BATCH": 56, "D1": 128, "D2": 256}


class Model(nn.Module):
    def __init__(self, dim: int, bound: float) -> None:
        super().__init__()
        self.dim = dim
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x, min=-self.bound, max=self.bound)
        return torch.linalg.vector_norm(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.7]
