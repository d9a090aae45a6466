"""2-D convolution, 3x3 kernel, padding 1 (nn.Conv2d): [N, C_in, H, W] -> [N, C_out, H, W]."""

import torch
from torch import nn

BATCH = 16
IN_CHANNELS = 64
OUT_CHANNELS = 128
HEIGHT = 64
WIDTH = 64
CPU_SIZES = {"BATCH": 8, "IN_CHANNELS": 8, "OUT_CHANNELS": 16, "HEIGHT": 32, "WIDTH": 32}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
