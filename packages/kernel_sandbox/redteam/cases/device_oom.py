# Asks for 10 TB of GPU memory.
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        hog = torch.empty(10 << 40, dtype=torch.uint8, device=x.device)
        return hog[: x.numel()].view(torch.float32)[: x.numel()].view(x.shape)
