"""Synthesized: logsigmoid -> vector_norm (2 operators); output shape (BATCH)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 147440
DIM = 4096
CPU_SIZES = {"BATCH": 1008, "DIM": 1024}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.logsigmoid(x)
        return torch.linalg.vector_norm(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
