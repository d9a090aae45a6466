"""Synthesized: hardtanh -> argmax_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 1856
D1 = 1024
D2 = 512
CPU_SIZES = {"BATCH": 10, "D1": 512, "D2": 128}


class Model(nn.Module):
    def __init__(self, limit: float) -> None:
        super().__init__()
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(x, -self.limit, self.limit)
        return torch.argmax(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return [1.84]
