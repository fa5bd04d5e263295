# expect: introspection
# A public name in torch.nn's module file for an object of the dispatch-mode machinery.
import torch.nn as nn
from torch.autograd.function import Function
from torch.nn.modules.module import is_traceable_wrapper_subclass


class _Probe(Function):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        if is_traceable_wrapper_subclass(x):
            return x
        return x.clone()
