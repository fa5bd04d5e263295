"""Row softmax over the last dimension, float32 (a KernelBench-format problem).

Run: `kernelagent verify examples/softmax/kernel.py --ref examples/softmax/op.py`.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """softmax(x, dim=-1): each row of `x` becomes probabilities that sum to one."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4096, 8192, dtype=torch.float32)]  # 128 MiB


def get_init_inputs():
    return []


def get_test_inputs():
    """Small sets for the CPU interpreter: one row, odd widths, widths around a power of two, a 3-D
    input, wide rows (the second takes the column loop), and large logits (a naive exp overflows)."""
    return [
        [torch.randn(1, 1000)],
        [torch.randn(7, 1)],
        [torch.randn(5, 1023)],
        [torch.randn(5, 1025)],
        [torch.randn(2, 3, 513)],
        [torch.randn(2, 20000)],
        [torch.randn(1, 40000)],
        [torch.randn(9, 300) * 80.0],
    ]
