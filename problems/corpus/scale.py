"""Scale each column by a learned weight (initialised to ones, so `return x` passes only trial one)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.weight


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64]


def get_test_inputs():
    return [[torch.randn(3, 64)]]
