"""ELU over a 2-D tensor: x if x > 0 else alpha * (exp(x) - 1) (F.elu)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 4096
DIM = 4096
CPU_SIZES = {"BATCH": 64, "DIM": 4096}


class Model(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.5]
