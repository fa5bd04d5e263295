# expect: missing `get_inputs` | `get_inputs()` (one input set)
# stage: inspect
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def make_inputs():
    return [torch.randn(4)]
