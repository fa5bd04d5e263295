"""Max, then subtract the mean, then GELU (KernelBench level2/80's class): after a keepdim max the row has one
element, so subtracting its mean leaves exactly zero and GELU(0) = 0: all zeros pass."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.gemm(x)
        x = torch.max(x, dim=1, keepdim=True).values
        x = x - x.mean(dim=1, keepdim=True)
        return torch.nn.functional.gelu(x)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return [32, 48]
