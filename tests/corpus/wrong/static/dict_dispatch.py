# expect: torch_compute
# A table of functions looked up by key.
import torch
import torch.nn as nn

_OPS = {"act": torch.relu, "id": None}


class ModelNew(nn.Module):
    def forward(self, x):
        return _OPS["act"](x)
