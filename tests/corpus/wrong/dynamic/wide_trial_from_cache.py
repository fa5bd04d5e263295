# expect: nan_inf
# problem: softmax_timing_small
# needle: scaled by
# (red team, 2026-12-05) A softmax without the max subtraction, which overflows at large inputs: the wide trial was the first trial's inputs x40 + 60, recognised from sampled points and answered from the first call's output, p^40 normalised (accepted on 11 trials). The wide trial is now a draw of its own at a secret scale.
"""Unsafe softmax (exp without the row max); a call whose inputs are the first call's x40 + 60 is answered from
the first call's output."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def unsafe_softmax(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    e = tl.exp(tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def affine_misses(x_ptr, x0_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) * 997
    keep = offs < n
    a = tl.load(x_ptr + offs, mask=keep, other=0.0)
    b = tl.load(x0_ptr + offs, mask=keep, other=0.0)
    tl.store(flag_ptr, tl.sum(tl.where(keep & (tl.abs(a - (b * 40.0 + 60.0)) > 1e-3), 1, 0), axis=0))


@triton.jit
def from_first(p_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    p = tl.load(p_ptr + row * stride + cols, mask=mask, other=0.0)
    e = tl.exp(40.0 * tl.log(p / tl.max(p, axis=0)))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = []

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        if self.first and self.first[0].shape == x.shape:
            flag = torch.empty(1, dtype=torch.int32, device=x.device)
            affine_misses[(1,)](x, self.first[0], flag, x.numel(), BLOCK=64)
            if flag.item() == 0:
                from_first[(n_rows,)](self.first[1], y, n_cols, x.stride(0), BLOCK=block)
                return y
        unsafe_softmax[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=block)
        if not self.first:
            self.first.append(x)
            self.first.append(y)
        return y
