# kind: norm
"""LayerNorm over the last dimension with learned affine parameters; gradients are checked too."""
import torch
import torch.nn as nn

BACKWARD = True
TOLERANCE = {"atol": 1e-4, "rtol": 1e-3}

rows = 16
hidden = 96


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(rows, hidden, requires_grad=True)]


def get_init_inputs():
    return [hidden]
