"""Synthesized: gelu_tanh -> mean_dim (2 operators); output shape (BATCH, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1308704
DIM = 512
CPU_SIZES = {"BATCH": 8192, "DIM": 512}


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(x, approximate="tanh")
        return torch.mean(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
