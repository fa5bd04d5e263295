"""Transpose into a new contiguous tensor (a pure data-movement problem)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.t().contiguous()


def get_inputs():
    return [torch.randn(16, 24)]


def get_init_inputs():
    return []


def get_test_inputs():
    return [[torch.randn(5, 7)], [torch.randn(33, 3)]]
