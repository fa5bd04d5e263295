# expect: eval_exec
# typing.get_type_hints evaluates annotations given as strings.
import typing

import torch.nn as nn


class _Spec:
    pass


_Spec.__init__.__annotations__ = {"x": "print('from a string')"}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.hints = typing.get_type_hints(_Spec.__init__)

    def forward(self, x):
        return x.clone()
