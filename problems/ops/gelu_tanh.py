# kind: activation
"""GELU with the tanh approximation, element-wise."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 8
dim = 300


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return []
