"""Synthesized: logsigmoid -> sum_dim (2 operators); output shape (BATCH, D1, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 128
D1 = 4096
D2 = 2048
CPU_SIZES = {"BATCH": 1024, "D1": 64, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int = 2) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.logsigmoid(x)
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
