"""Synthesized: log_softmax_dim -> elu (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 984
D1 = 512
D2 = 512
CPU_SIZES = {"BATCH": 88, "D1": 512, "D2": 32}


class Model(nn.Module):
    def __init__(self, dim: int, alpha: float) -> None:
        super().__init__()
        self.dim = dim
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.log_softmax(x, dim=self.dim)
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1, 1.12]
