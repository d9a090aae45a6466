"""Synthesized: l1_normalize_dim -> logsigmoid (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 256
D1 = 1024
D2 = 4096
CPU_SIZES = {"BATCH": 16, "D1": 64, "D2": 512}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.mean(torch.abs(x), dim=self.dim, keepdim=True)
        return F.logsigmoid(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
