"""Synthesized: amin -> leaky_relu -> sigmoid (3 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 1616, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.amin(x, dim=-1)
        x = F.leaky_relu(x, self.negative_slope)
        return torch.sigmoid(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.29]
