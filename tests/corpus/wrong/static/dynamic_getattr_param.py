# expect: dynamic_attr
# The function name comes from a constructor argument.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, op_name="relu"):
        super().__init__()
        self.op_name = op_name

    def forward(self, x):
        return getattr(torch, self.op_name)(x)
