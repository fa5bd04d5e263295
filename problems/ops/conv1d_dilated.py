# kind: conv1d
"""Dilated 1-D convolution over a long sequence."""
import torch
import torch.nn as nn

batch = 3
channels_in = 8
channels_out = 4
kernel = 5
dilation = 2
length = 100


class Model(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, kernel: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv1d(channels_in, channels_out, kernel, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch, channels_in, length)]


def get_init_inputs():
    return [channels_in, channels_out, kernel, dilation]
