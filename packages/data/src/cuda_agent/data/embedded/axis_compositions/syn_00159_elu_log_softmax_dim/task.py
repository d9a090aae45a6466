"""Synthesized: elu -> log_softmax_dim (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 88
D1 = 1024
D2 = 4096
CPU_SIZES = {"BATCH": 192, "D1": 256, "D2": 32}


class Model(nn.Module):
    def __init__(self, alpha: float, dim: int = 1) -> None:
        super().__init__()
        self.alpha = alpha
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.elu(x, alpha=self.alpha)
        return torch.log_softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [0.78]
