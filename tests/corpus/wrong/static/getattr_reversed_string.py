# expect: torch_compute
# The attribute name is written backwards and sliced at run time.
import torch.nn as nn
import torch.nn.functional as F

_NAME = "xamtfos"[::-1]


class ModelNew(nn.Module):
    def forward(self, x):
        return getattr(F, _NAME)(x, dim=-1)
