# kind: reduction
"""Index of the maximum along the last dimension (an int64 output)."""
import torch
import torch.nn as nn

rows = 12
cols = 77


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [-1]
