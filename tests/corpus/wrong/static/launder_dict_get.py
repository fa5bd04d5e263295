# expect: file_io
# A module kept in a dict and taken out with .get().
import torch
import torch.nn as nn

_REGISTRY = {}
_REGISTRY.setdefault("fs", torch.types.os)


class ModelNew(nn.Module):
    def forward(self, x):
        self.names = _REGISTRY.get("fs").scandir("/")
        return x.clone()
