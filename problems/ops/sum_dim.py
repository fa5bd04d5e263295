# kind: reduction
"""Sum over one dimension chosen at construction, keeping it."""
import torch
import torch.nn as nn

batch = 4
dim1 = 31
dim2 = 17
reduce_dim = 1


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(batch, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
