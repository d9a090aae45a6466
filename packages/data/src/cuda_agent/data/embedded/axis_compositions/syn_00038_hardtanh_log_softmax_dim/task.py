"""Synthesized: hardtanh -> log_softmax_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2576
D1 = 1024
D2 = 256
CPU_SIZES = {"BATCH": 4, "D1": 256, "D2": 512}


class Model(nn.Module):
    def __init__(self, limit: float) -> None:
        super().__init__()
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(x, -self.limit, self.limit)
        return torch.log_softmax(x, dim=2)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1.62]
