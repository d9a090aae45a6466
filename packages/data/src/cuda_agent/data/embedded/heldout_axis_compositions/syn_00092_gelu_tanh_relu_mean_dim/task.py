"""Synthesized: gelu_tanh -> relu -> mean_dim (3 operators); output shape (BATCH, D1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 256
D1 = 2048
D2 = 1024
CPU_SIZES = {"BATCH": 16, "D1": 128, "D2": 128}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(x, approximate="tanh")
        x = torch.relu(x)
        return torch.mean(x, dim=2)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
