"""A fully connected layer followed by exact (erf) GELU: gelu(x @ W.T + b)."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
IN_FEATURES = 1024
OUT_FEATURES = 4096
CPU_SIZES = {"BATCH": 128, "IN_FEATURES": 256, "OUT_FEATURES": 512}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
