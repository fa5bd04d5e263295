# kind: conv_transpose
"""Upsampling transposed 2-D convolution without bias."""
import torch
import torch.nn as nn

batch = 2
in_channels = 4
out_channels = 6
kernel_size = 4
stride = 2
size = 8


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


def get_inputs():
    return [torch.randn(batch, in_channels, size, size)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride]
