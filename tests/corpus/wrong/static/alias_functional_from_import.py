# expect: torch_compute
# `from torch.nn import functional as q` then q.gelu.
import torch
from torch import nn
from torch.nn import functional as q


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        out.copy_(q.gelu(x))
        return out
