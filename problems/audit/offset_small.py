"""Healthy twin of offset_dominates: a small bias on inputs of unit scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        return x + self.bias


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return [64]
