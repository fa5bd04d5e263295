# expect: torch_compute
# Red team round 7 (2026-12-03): a02 classbody func iter; passed the static policy before the fix (the op recorder caught it).
import torch
from torch import nn


def _rows_iter(self):
    return iter((self.x.softmax(-1),))


class Rows:
    __iter__ = _rows_iter


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.rows = Rows()

    def forward(self, x):
        self.rows.x = x
        (y,) = self.rows
        return y
