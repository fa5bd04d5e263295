# expect: torch_compute
# Functions handed to map and functools.partial in __init__ run when forward advances or calls them.
import functools

import torch
from torch import nn


def _step(x, dim):
    return x.softmax(dim)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.box = []
        self.lazy = map(functools.partial(_step, dim=-1), self.box)

    def forward(self, x):
        self.box.append(x)
        return next(self.lazy)
