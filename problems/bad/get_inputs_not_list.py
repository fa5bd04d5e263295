# expect: get_inputs() must return a list or tuple | got Tensor
# stage: call
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():  # <- here
    return torch.randn(4)
