"""Synthesized: mean_dim -> softplus -> gelu (3 operators); output shape (BATCH, 1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 512
D1 = 1024
D2 = 2048
CPU_SIZES = {"BATCH": 128, "D1": 256, "D2": 64}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=1, keepdim=True)
        x = F.softplus(x)
        return F.gelu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
