# expect: mismatch
# policy: off
# problem: softmax
# needle: outside tolerance
"""Shape hard-coding: rows of 64 and a grid of 8 programs, the benchmark's main size. Other sizes
are covered in full (the mask is on the element count) but normalised over the wrong rows."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ROWS, COLS = 8, 64


@triton.jit
def _softmax(x_ptr, y_ptr, numel, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = row * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + offs, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax[(ROWS,)](x, y, x.numel(), BLOCK=COLS)
        return y
