"""Synthesized: leaky_relu -> max_dim (2 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1024
D1 = 2048
D2 = 512
CPU_SIZES = {"BATCH": 480, "D1": 256, "D2": 32}


class Model(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.leaky_relu(x, self.negative_slope)
        return torch.max(x, dim=1)[0]


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [0.08]
