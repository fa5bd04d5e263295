# expect: syntax error | get_inputs
# stage: inspect
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs(:  # <- here
    return [torch.randn(4)]
