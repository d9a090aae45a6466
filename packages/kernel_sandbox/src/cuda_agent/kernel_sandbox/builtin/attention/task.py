"""Scaled dot-product attention softmax(Q K^T / sqrt(D)) V on [BATCH, HEADS, SEQ, HEAD_DIM]."""

import torch
from torch import nn

BATCH = 4
HEADS = 16
SEQ = 512
HEAD_DIM = 64
CPU_SIZES = {"BATCH": 2, "HEADS": 4, "SEQ": 128, "HEAD_DIM": 64}


class Model(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        return torch.softmax(scores, dim=-1) @ v


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
