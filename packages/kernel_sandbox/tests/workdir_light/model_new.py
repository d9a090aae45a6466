import cuda_extension  # built by the sandbox from kernels/
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x.contiguous())
