"""Synthesized: softsign -> norm_dim -> softplus (3 operators); output shape (BATCH, D1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 512
D1 = 4096
D2 = 512
CPU_SIZES = {"BATCH": 1232, "D1": 32, "D2": 64}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.softsign(x)
        x = torch.linalg.vector_norm(x, dim=2)
        return F.softplus(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
