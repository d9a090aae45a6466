"""GELU with the tanh approximation over a 2-D tensor (F.gelu(x, approximate="tanh"))."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 64, "DIM": 4096}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
