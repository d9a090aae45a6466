"""Synthesized: exp -> log_softmax_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 1712
D1 = 1024
D2 = 512
CPU_SIZES = {"BATCH": 4096, "D1": 32, "D2": 32}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.exp(x)
        return torch.log_softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2]
