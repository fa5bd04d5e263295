# kind: conv2d
"""A strided, padded 2-D convolution with bias, odd channel counts."""
import torch
import torch.nn as nn

batch = 2
in_channels = 3
out_channels = 5
kernel_size = 3
stride = 2
padding = 1
height = 17
width = 19


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
