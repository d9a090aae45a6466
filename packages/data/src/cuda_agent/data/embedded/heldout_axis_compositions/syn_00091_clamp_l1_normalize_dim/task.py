"""Synthesized: clamp -> l1_normalize_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 4096
D1 = 256
D2 = 1024
CPU_SIZES = {"BATCH": 16, "D1": 512, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int, bound: float) -> None:
        super().__init__()
        self.dim = dim
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x, min=-self.bound, max=self.bound)
        return x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.98]
