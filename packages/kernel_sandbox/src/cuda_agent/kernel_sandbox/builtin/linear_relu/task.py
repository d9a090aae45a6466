"""A fully connected layer followed by ReLU: relu(x @ W.T + b) (nn.Linear, then ReLU)."""

import torch
from torch import nn

BATCH = 2048
IN_FEATURES = 2048
OUT_FEATURES = 2048
CPU_SIZES = {"BATCH": 64, "IN_FEATURES": 256, "OUT_FEATURES": 256}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
