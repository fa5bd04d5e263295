# kind: matmul
"""Batched matrix multiply with non-square, non-power-of-two operands."""
import torch
import torch.nn as nn

batch = 4
m = 33
k = 20
n = 45


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return []
