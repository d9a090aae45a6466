"""Euclidean (L2) norm of each row of a 2-D tensor: [BATCH, DIM] -> [BATCH]."""

import torch
from torch import nn

BATCH = 4096
DIM = 8192
CPU_SIZES = {"BATCH": 128, "DIM": 4096}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vector_norm(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
