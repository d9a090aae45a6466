"""Synthesized: hardtanh -> log_softmax_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 968
D1 = 2048
D2 = 256
CPU_SIZES = {"BATCH": 288, "D1": 64, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int, limit: float) -> None:
        super().__init__()
        self.dim = dim
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(x, -self.limit, self.limit)
        return torch.log_softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [2, 1.13]
