# expect: mismatch
# policy: off
# problem: scale
# needle: outside tolerance
"""Ignores the weight parameter: right while the weight is all ones (its initial value), wrong once
the parameters are re-initialised."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
