# expect: torch_compute
# Red team round 7 (2026-12-03): c10 genexp inline compute; passed the static policy before the fix (the op recorder caught it).
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.box = []
        self.gen = (v.softmax(-1) for v in self.box)

    def forward(self, x):
        self.box.append(x)
        return next(self.gen)
