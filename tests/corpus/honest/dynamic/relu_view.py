# problem: relu
"""Honest: flatten with .view, a masked tail, the result viewed back to the input's shape."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        flat = x.contiguous().view(-1)
        y = torch.empty_like(flat)
        n = flat.numel()
        _relu[(triton.cdiv(n, 128),)](flat, y, n, BLOCK=128)
        return y.view(x.shape)
