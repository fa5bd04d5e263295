# expect: fallback_to_reference
# policy: off
# problem: softmax
# needle: softmax
"""Fallback on error, shown to the dynamic layers alone: the kernel only handles rows up to 64
columns; wider rows raise and the except branch returns PyTorch's softmax."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


def launch(x):
    if x.shape[1] > 64:
        raise ValueError("row too long for one block")
    y = torch.empty_like(x)
    _softmax[(x.shape[0],)](x, y, x.stride(0), x.shape[1], BLOCK=64)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        try:
            return launch(x)
        except ValueError:
            return torch.softmax(x, dim=-1)
