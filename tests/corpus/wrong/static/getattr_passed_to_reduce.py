# expect: dynamic_attr
# getattr handed to functools.reduce: the path it walks is data, not source.
import functools

import torch
import torch.nn as nn

_PATH = ["nn", "functional", "softmax"]


class ModelNew(nn.Module):
    def forward(self, x):
        fn = functools.reduce(getattr, _PATH, torch)
        return fn(x, -1)
