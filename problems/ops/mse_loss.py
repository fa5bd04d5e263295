# kind: loss
"""Mean squared error between a prediction and a target of the same shape."""
import torch
import torch.nn as nn

batch = 8
features = 50


class Model(nn.Module):
    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.mean((pred - target) ** 2)


def get_inputs():
    return [torch.randn(batch, features), torch.randn(batch, features)]


def get_init_inputs():
    return []
