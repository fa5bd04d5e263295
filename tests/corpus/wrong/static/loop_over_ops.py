# expect: torch_compute
# Applies a tuple of functions in a loop.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = x
        for fn in (torch.exp, torch.log1p):
            y = fn(y)
        return y
