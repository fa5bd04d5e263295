# kind: reduction
"""Maximum along a dimension returned as a tuple: (float values, int64 indices)."""
import torch
import torch.nn as nn

batch = 6
length = 40


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = torch.max(x, dim=1)
        return values, indices


def get_inputs():
    return [torch.randn(batch, length)]


def get_init_inputs():
    return []
