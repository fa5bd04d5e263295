"""Element-wise ReLU on signed inputs; the main size is a multiple of 128, one test size is odd."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 96)]


def get_init_inputs():
    return []


def get_test_inputs():
    return [[torch.randn(5, 77)], [torch.randn(1000)]]
