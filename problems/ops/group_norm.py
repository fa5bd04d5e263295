# kind: norm
"""GroupNorm with 4 groups over 12 channels."""
import torch
import torch.nn as nn

batch = 3
groups = 4
channels = 12
spatial = 10


class Model(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.gn = nn.GroupNorm(groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_inputs():
    return [torch.randn(batch, channels, spatial, spatial)]


def get_init_inputs():
    return [groups, channels]
