"""Synthesized: mean_dim -> relu6 -> mish (3 operators); output shape (BATCH, 1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
D1 = 1024
D2 = 512
CPU_SIZES = {"BATCH": 512, "D1": 128, "D2": 64}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=self.dim, keepdim=True)
        x = F.relu6(x)
        return F.mish(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1]
