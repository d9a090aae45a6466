"""Matrix multiplication of two inputs: A[M, K] @ B[K, N] -> [M, N]."""

import torch
from torch import nn

M = 2048
K = 1024
N = 2048
CPU_SIZES = {"M": 256, "K": 256, "N": 256}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
