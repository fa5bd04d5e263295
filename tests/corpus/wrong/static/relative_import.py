# expect: reference_access
# Imports the reference from the package next to it.
import torch.nn as nn

from .op import Model as _Ref


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Ref()

    def forward(self, x):
        return self.inner(x)
