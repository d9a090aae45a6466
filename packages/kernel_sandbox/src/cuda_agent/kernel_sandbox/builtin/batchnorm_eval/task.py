"""Batch normalization in eval mode with running statistics (nn.BatchNorm1d on [N, C, L])."""

import torch
from torch import nn

BATCH = 64
CHANNELS = 128
LENGTH = 2048
CPU_SIZES = {"BATCH": 32, "CHANNELS": 64, "LENGTH": 256}


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(channels)
        # Non-trivial running statistics (the defaults are zeros and ones), from a fixed seed.
        g = torch.Generator().manual_seed(0)
        self.bn.running_mean.copy_(0.5 * torch.randn(channels, generator=g))
        self.bn.running_var.copy_(0.5 + torch.rand(channels, generator=g))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs():
    return [CHANNELS]
