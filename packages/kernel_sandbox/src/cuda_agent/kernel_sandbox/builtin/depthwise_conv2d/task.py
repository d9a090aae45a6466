"""Depthwise 3x3 convolution, padding 1 (nn.Conv2d with groups = channels)."""

import torch
from torch import nn

BATCH = 16
CHANNELS = 64
HEIGHT = 128
WIDTH = 128
CPU_SIZES = {"BATCH": 8, "CHANNELS": 32, "HEIGHT": 32, "WIDTH": 32}


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
