"""Scores times a constant lower-triangular mask the constructor builds (a buffer): a kernel may apply the mask
by comparing indices instead of reading it."""
import torch
import torch.nn as nn

size = 48


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(n, n)))

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        return scores * self.mask


def get_inputs():
    return [torch.randn(4, size, size)]


def get_init_inputs():
    return [size]
