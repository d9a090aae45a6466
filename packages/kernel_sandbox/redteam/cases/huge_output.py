# Prints far more than the output cap.
import sys

from torch import nn

CHUNK = "x" * (1 << 20)


class ModelNew(nn.Module):
    def forward(self, x):
        for _ in range(200):
            sys.stdout.write(CHUNK)
        return x
