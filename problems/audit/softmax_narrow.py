"""Healthy twin of softmax_wide: 16 columns, outputs around 0.06 and up to ~0.5, so no trivial answer passes.
Its test sets include a width-1 softmax (always 1): an edge case the audit notes but does not judge by."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(64, 16)]


def get_init_inputs():
    return []


def get_test_inputs():
    return [[torch.randn(7, 1)], [torch.randn(3, 33)]]
