# Asks for 64 GiB of host memory.
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        hog = torch.empty(64 << 30, dtype=torch.uint8)
        return hog[: x.numel()].view(x.shape)
