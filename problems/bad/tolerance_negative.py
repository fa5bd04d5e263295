# expect: TOLERANCE['rtol'] must be a finite number >= 0 | -0.1
# stage: inspect
import torch
import torch.nn as nn

TOLERANCE = {"atol": 1e-3, "rtol": -0.1}  # <- here


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]
