"""Synthesized: hardswish -> mean_dim -> relu6 (3 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 632
D1 = 4096
D2 = 256
CPU_SIZES = {"BATCH": 40, "D1": 512, "D2": 32}


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardswish(x)
        x = torch.mean(x, dim=self.dim)
        return F.relu6(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
