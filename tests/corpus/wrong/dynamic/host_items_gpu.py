# expect: fallback_to_reference
# policy: off
# problem: softmax
# needle: host
# gpu: yes
"""The row maxima read back one element at a time with .item() (a host loop over the inputs), the rest in
Triton: input data leaves the GPU element by element."""

import math

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
    def forward(self, x):
        rows, cols = x.shape
        vals = [[math.exp(x[r, c].item()) for c in range(cols)] for r in range(rows)]
        staged = torch.tensor([[v / sum(row) for v in row] for row in vals], device=x.device, dtype=x.dtype)
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 256),)](staged, y, x.numel(), BLOCK=256)
        return y
