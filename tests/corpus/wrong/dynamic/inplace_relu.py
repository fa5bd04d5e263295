# expect: input_mutation
# policy: off
# problem: relu
# needle: modified
"""Writes the result into its input buffer and returns the input (saves an allocation)."""

import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.numel()
        _relu_[(triton.cdiv(n, 128),)](x, n, BLOCK=128)
        return x
