"""Synthesized: leaky_relu -> max_dim -> softplus (3 operators); output shape (BATCH, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 504
D1 = 512
D2 = 2048
CPU_SIZES = {"BATCH": 40, "D1": 512, "D2": 128}


class Model(nn.Module):
    def __init__(self, dim: int, negative_slope: float) -> None:
        super().__init__()
        self.dim = dim
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.leaky_relu(x, self.negative_slope)
        x = torch.max(x, dim=self.dim)[0]
        return F.softplus(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 0.27]
