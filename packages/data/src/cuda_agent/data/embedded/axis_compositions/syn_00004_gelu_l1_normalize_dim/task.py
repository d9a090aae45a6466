"""Synthesized: gelu -> l1_normalize_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 4592
D1 = 256
D2 = 256
CPU_SIZES = {"BATCH": 13, "D1": 512, "D2": 64}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(x)
        return x / torch.mean(torch.abs(x), dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
