"""Attention probabilities without scaling: softmax(Q @ K^T, dim=-1), Q and K [BATCH, SEQ, DIM]."""

import torch
from torch import nn

BATCH = 64
SEQ = 512
DIM = 64
CPU_SIZES = {"BATCH": 4, "SEQ": 256, "DIM": 64}


class Model(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM), torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return []
