"""Synthesized: mean_dim -> logsigmoid (2 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2097152
DIM = 512
CPU_SIZES = {"BATCH": 2056, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.mean(x, dim=1)
        return F.logsigmoid(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
