# kind: activation
"""Softsign x / (1 + |x|), with extra input sets: odd sizes, one element, large magnitudes."""
import torch
import torch.nn as nn

batch = 16
dim = 256


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / (1 + torch.abs(x))


def get_inputs():
    return [torch.randn(batch, dim)]


def get_test_inputs():
    return [
        [torch.randn(1, 1)],
        [torch.randn(3, 1001)],
        (1e4 * torch.randn(5, 7),),
    ]


def get_init_inputs():
    return []
