# expect: get_init_inputs() raised ValueError | first part second part
# stage: call
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        return x * self.n


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    raise ValueError("first part\n\nsecond part")  # <- here
