# expect: BACKWARD must be True or False | 'yes'
# stage: inspect
import torch
import torch.nn as nn

BACKWARD = "yes"  # <- here


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4, requires_grad=True)]
