"""relu(x @ W^T + b) with nn.Linear-style parameters, bfloat16 (a KernelBench-format problem).

Run: `kernelagent verify examples/matmul_bias_relu/kernel.py --ref examples/matmul_bias_relu/op.py`.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16
IN_FEATURES = 2048
OUT_FEATURES = 1000  # not a multiple of the column tile: the edge tiles are exercised


class Model(nn.Module):
    """A linear layer followed by ReLU: weight [out, in], bias [out], as nn.Linear keeps them."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default initialisation range
        self.weight = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound).to(DTYPE))
        self.bias = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound).to(DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(F.linear(x, self.weight, self.bias))


def get_inputs():
    return [torch.randn(16384, IN_FEATURES, dtype=DTYPE)]  # 64 MiB; 67 GFLOP


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]


def get_test_inputs():
    """Small sets for the CPU interpreter (the widths are fixed by the weight): one row, a few rows,
    rows just above a tile, and a 3-D input."""
    return [
        [torch.randn(1, IN_FEATURES, dtype=DTYPE)],
        [torch.randn(7, IN_FEATURES, dtype=DTYPE)],
        [torch.randn(129, IN_FEATURES, dtype=DTYPE)],
        [torch.randn(2, 3, IN_FEATURES, dtype=DTYPE)],
    ]
