# problem: scale
"""Honest: the weight parameter is read inside the kernel on every call."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, w_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask)
    w = tl.load(w_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, x * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        _scale[(n_rows,)](x, self.weight, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y
