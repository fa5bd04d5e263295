"""A small row softmax, sized for the CPU interpreter (test problem)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(48, 200)]


def get_init_inputs():
    return []


def get_test_inputs():
    return [[torch.randn(3, 33)], [torch.randn(1, 129) * 30.0]]
