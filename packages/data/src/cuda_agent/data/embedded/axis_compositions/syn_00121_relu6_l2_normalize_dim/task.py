"""Synthesized: relu6 -> l2_normalize_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 8192
D1 = 512
D2 = 256
CPU_SIZES = {"BATCH": 72, "D1": 128, "D2": 256}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(x)
        return x / torch.norm(x, p=2, dim=2, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
