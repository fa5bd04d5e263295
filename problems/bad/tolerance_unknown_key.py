# expect: TOLERANCE has unknown key(s) eps | 'atol' and 'rtol'
# stage: inspect
import torch
import torch.nn as nn

TOLERANCE = {"atol": 1e-3, "eps": 1e-2}  # <- here


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]
