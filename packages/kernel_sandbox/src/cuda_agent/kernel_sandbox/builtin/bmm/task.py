"""Batched matrix multiplication: A[BATCH, M, K] @ B[BATCH, K, N] -> [BATCH, M, N] (torch.bmm)."""

import torch
from torch import nn

BATCH = 32
M = 512
K = 256
N = 512
CPU_SIZES = {"BATCH": 16, "M": 128, "K": 64, "N": 128}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
