"""Softmax over 16384 columns: every output is about 6e-5, so all zeros pass an absolute tolerance of 1e-2
(KernelBench level2/66's class). Under the verifier's own relative rule zeros fail."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4, 16384)]


def get_init_inputs():
    return []
