"""1-D convolution, stride 1, no padding (nn.Conv1d): [N, C_in, L] -> [N, C_out, L - k + 1]."""

import torch
from torch import nn

BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 128
LENGTH = 4096
KERNEL_SIZE = 5
CPU_SIZES = {"BATCH": 16, "IN_CHANNELS": 16, "OUT_CHANNELS": 32, "LENGTH": 256, "KERNEL_SIZE": 5}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, LENGTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE]
