# expect: torch_compute
# A tuple-like output whose indexing computes.
import torch.nn as nn
import torch.nn.functional as F


class _Pair(tuple):
    def __getitem__(self, i):
        return F.gelu(tuple.__getitem__(self, i))


class ModelNew(nn.Module):
    def forward(self, x):
        return _Pair((x,))
