# problem: softmax
"""Honest: a launch-config cache keyed on the row length, filled in a try/except KeyError in host code
that does not surround the launch; the kernel itself always runs."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = {}

    def block_for(self, n_cols):
        try:
            return self.blocks[n_cols]
        except KeyError:
            block = max(16, triton.next_power_of_2(n_cols))
            self.blocks[n_cols] = block
            return block

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        block = self.block_for(x.shape[1])
        _softmax[(x.shape[0],)](x, y, x.stride(0), x.shape[1], BLOCK=block)
        return y
