"""Synthesized: mul -> gelu_tanh -> mean_dim (3 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 815600
DIM = 1024
CPU_SIZES = {"BATCH": 1176, "DIM": 256}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x * y
        x = F.gelu(x, approximate="tanh")
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
