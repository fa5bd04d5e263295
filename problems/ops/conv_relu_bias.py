# kind: fused
"""Level-2 style chain: Conv2d, ReLU, then a learned per-channel bias added."""
import torch
import torch.nn as nn

batch = 2
in_channels = 3
out_channels = 8
kernel_size = 3
size = 12
bias_shape = (out_channels, 1, 1)


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    return [torch.randn(batch, in_channels, size, size)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
