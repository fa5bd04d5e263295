"""A mean after a normalisation (KernelBench level2/23's class): LayerNorm makes every row's mean zero (its
default affine is the identity), so the output is rounding noise and zeros pass under any tolerance."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return self.norm(x).mean(dim=-1)


def get_inputs():
    return [torch.rand(32, 64)]


def get_init_inputs():
    return [64]
