"""Row softmax, tiny shapes for the CPU interpreter (dynamic cheat tests)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []


def get_test_inputs():
    return [[torch.randn(3, 33)], [torch.randn(2, 100) * 30.0]]
