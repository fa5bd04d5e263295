# expect: get_test_inputs() must return a list of input sets | item 0 is a Tensor
# stage: call
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_test_inputs():  # <- here
    return [torch.randn(3), torch.randn(5)]
