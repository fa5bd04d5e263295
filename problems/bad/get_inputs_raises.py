# expect: get_inputs() raised RuntimeError | cannot be multiplied
# stage: call
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    a = torch.randn(4, 5)
    return [a @ torch.randn(3, 2)]  # <- here
