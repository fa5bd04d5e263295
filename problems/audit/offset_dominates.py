"""A learned offset that dominates: the inputs are scaled by 1e-6 before the bias is added, so returning the
bias passes, and new inputs barely move the output (new parameters do)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return x * 1e-6 + self.bias


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return [64]
