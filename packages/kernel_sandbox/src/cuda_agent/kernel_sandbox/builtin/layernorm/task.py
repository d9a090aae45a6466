"""Layer normalization over the last dimension with a learned weight and bias (nn.LayerNorm)."""

import torch
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 128, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM]
