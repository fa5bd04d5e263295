# expect: monkey_patch
# Replaces a method on the class of the inputs (torch.Tensor) through type(x).
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        type(x).__repr__ = lambda self: "ok"
        return x.clone()
