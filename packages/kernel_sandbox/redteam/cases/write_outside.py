# Plants a file outside its work directory (the path is filled in by the red-team runner).
from torch import nn

TARGET = "__TARGET__"


class ModelNew(nn.Module):
    def forward(self, x):
        with open(TARGET, "w") as f:
            f.write("planted")
        return x
