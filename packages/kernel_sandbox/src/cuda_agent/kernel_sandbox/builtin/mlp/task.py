"""A two-layer MLP: fc2(relu(fc1(x))) with nn.Linear layers."""

import torch
from torch import nn

BATCH = 2048
IN_FEATURES = 1024
HIDDEN = 4096
OUT_FEATURES = 1024
CPU_SIZES = {"BATCH": 64, "IN_FEATURES": 256, "HIDDEN": 512, "OUT_FEATURES": 256}


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, OUT_FEATURES]
