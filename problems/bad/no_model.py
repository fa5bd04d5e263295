# expect: missing `Model` | class Model(nn.Module)
# stage: inspect
import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(4)]
