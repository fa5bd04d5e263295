"""Row softmax at KernelBench level-1 size (16 x 16384 float32, 1 MiB): the verifier-cost benchmark's
small case, next to the 128 MiB example (examples/softmax/op.py). Same function, same candidate."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(16, 16384, dtype=torch.float32)]


def get_init_inputs():
    return []


def get_test_inputs():
    return [[torch.randn(5, 1023)], [torch.randn(2, 3, 513)], [torch.randn(9, 300) * 80.0]]
