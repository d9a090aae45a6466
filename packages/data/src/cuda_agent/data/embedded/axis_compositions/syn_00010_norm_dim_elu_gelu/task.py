"""Synthesized: norm_dim -> elu -> gelu (3 operators); output shape (BATCH, D1, 1)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 256
D1 = 2048
D2 = 2048
CPU_SIZES = {"BATCH": 136, "D1": 256, "D2": 64}


class Model(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.linalg.vector_norm(x, dim=2, keepdim=True)
        x = F.elu(x, alpha=self.alpha)
        return F.gelu(x)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1.0]
