# kind: scan
"""Cumulative product in float64, values near 1 so the product neither vanishes nor overflows."""
import torch
import torch.nn as nn

batch = 4
length = 64


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=self.dim)


def get_inputs():
    return [1.0 + 0.05 * torch.randn(batch, length, dtype=torch.float64)]


def get_init_inputs():
    return [1]
