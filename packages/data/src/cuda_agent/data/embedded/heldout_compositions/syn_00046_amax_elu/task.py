"""Synthesized: amax -> elu (2 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 524288
DIM = 2048
CPU_SIZES = {"BATCH": 2096, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.amax(x, dim=-1)
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.81]
