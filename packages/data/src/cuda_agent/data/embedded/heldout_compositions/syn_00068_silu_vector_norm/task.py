"""Synthesized: silu -> vector_norm (2 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1048576
DIM = 1024
CPU_SIZES = {"BATCH": 3032, "DIM": 512}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.silu(x)
        return torch.linalg.vector_norm(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
