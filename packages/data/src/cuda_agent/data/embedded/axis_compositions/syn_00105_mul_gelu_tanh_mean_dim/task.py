"""Synthesized: mul -> gelu_tanh -> mean_dim (3 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 90784
DIM = 4096
CPU_SIZES = {"BATCH": 928, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x * y
        x = F.gelu(x, approximate="tanh")
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
