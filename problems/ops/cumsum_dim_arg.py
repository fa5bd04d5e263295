# kind: scan
"""Inclusive prefix sum where the scan dimension is a plain int passed to forward, not a tensor."""
import torch
import torch.nn as nn

batch = 5
length = 129
scan_dim = 1


class Model(nn.Module):
    def forward(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        return torch.cumsum(x, dim=dim)


def get_inputs():
    return [torch.randn(batch, length), scan_dim]


def get_test_inputs():
    return [
        [torch.randn(3, 1), 1],
        [torch.randn(7, 33), 0],
    ]


def get_init_inputs():
    return []
