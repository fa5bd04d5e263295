# expect: ok
# problem: softmax
# policy: on
"""Honest softmax with the kernel's own combine functions (under the interpreter they ran as Python beside the
kernel and were refused, 2026-12-03: the library's LayerNorm): the row max through tl.reduce with a one-value
combine function, the row sum and a count through a two-value one (as LayerNorm's backward sums a pair), and the
sum again through tl.associative_scan (the last prefix sum), averaged with the first."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _max_of(a, b):
    return tl.maximum(a, b)


@triton.jit
def _add_pair(a1, a2, b1, b2):
    return a1 + b1, a2 + b2


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.reduce(x, 0, _max_of))
    total, count = tl.reduce((e, mask.to(tl.float32)), 0, _add_pair)
    prefix = tl.associative_scan(e, 0, _add)
    last = tl.sum(tl.where(cols == count.to(tl.int32) - 1, prefix, 0.0), axis=0)
    tl.store(y_ptr + row * stride_y + cols, e / ((total + last) * 0.5), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        n_rows, n_cols = x2.shape
        softmax_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y.view(x.shape)
