"""Synthesized: tanh -> l1_normalize_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 64
D1 = 4096
D2 = 4096
CPU_SIZES = {"BATCH": 208, "D1": 128, "D2": 32}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        return x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
