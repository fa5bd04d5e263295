# kind: norm
"""BatchNorm2d in inference form: normalise with stored running statistics, whatever the module mode."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 4
channels = 6
height = 7
width = 9


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = nn.Parameter(torch.randn(channels))
        self.register_buffer("running_mean", torch.randn(channels))
        self.register_buffer("running_var", torch.rand(channels) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=False, eps=1e-5)


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels]
