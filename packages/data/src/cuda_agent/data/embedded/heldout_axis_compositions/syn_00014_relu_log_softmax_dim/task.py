"""Synthesized: relu -> log_softmax_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
from torch import nn

BATCH = 8192
D1 = 256
D2 = 512
CPU_SIZES = {"BATCH": 128, "D1": 32, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        return torch.log_softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
