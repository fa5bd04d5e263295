# kind: pooling
"""Overlapping 3x3 max pooling with stride 2 and padding."""
import torch
import torch.nn as nn

batch = 2
channels = 3
height = 15
width = 16


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [3, 2, 1]
