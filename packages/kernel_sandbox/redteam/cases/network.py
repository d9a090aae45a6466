# Opens a network connection (the port is filled in by the red-team runner).
import socket

from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        socket.create_connection(("127.0.0.1", __PORT__), timeout=2).close()
        return x
