# kind: pooling
"""1-D average pooling that counts padded zeros in the divisor."""
import torch
import torch.nn as nn

batch = 4
channels = 5
length = 50
kernel = 4


class Model(nn.Module):
    def __init__(self, kernel: int):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel, stride=kernel // 2, padding=1, count_include_pad=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch, channels, length)]


def get_init_inputs():
    return [kernel]
