"""Index of the maximum of each row of a 2-D tensor: [BATCH, DIM] -> [BATCH] int64 (argmax)."""

import torch
from torch import nn

BATCH = 4096
DIM = 8192
CPU_SIZES = {"BATCH": 128, "DIM": 4096}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
