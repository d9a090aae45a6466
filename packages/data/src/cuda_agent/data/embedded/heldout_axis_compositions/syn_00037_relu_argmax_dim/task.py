"""Synthesized: relu -> argmax_dim (2 operators); output shape (BATCH, 1, D2)."""

import torch
from torch import nn

BATCH = 2968
D1 = 256
D2 = 1024
CPU_SIZES = {"BATCH": 312, "D1": 128, "D2": 32}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        return torch.argmax(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, D1, D2)]


def get_init_inputs():
    return []
