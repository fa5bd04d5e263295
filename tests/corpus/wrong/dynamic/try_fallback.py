# expect: policy_violation
# policy: on
# problem: softmax
# needle: try_around_kernel
"""Fallback on error: the kernel is attempted, and any failure returns PyTorch's softmax."""

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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        try:
            y = torch.empty_like(x)
            _softmax[(x.shape[0],)](x, y, x.stride(0), x.shape[1], BLOCK=64)
            return y
        except Exception:
            return torch.softmax(x, dim=-1)
