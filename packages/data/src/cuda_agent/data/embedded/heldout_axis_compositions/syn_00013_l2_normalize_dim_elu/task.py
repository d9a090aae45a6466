"""Synthesized: l2_normalize_dim -> elu (2 operators); output shape (BATCH, D1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 448
D1 = 512
D2 = 4096
CPU_SIZES = {"BATCH": 152, "D1": 32, "D2": 256}


class Model(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / torch.norm(x, p=2, dim=2, keepdim=True)
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1.48]
