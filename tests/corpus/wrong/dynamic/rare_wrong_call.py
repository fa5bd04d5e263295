# expect: nondeterministic
# policy: off
# problem: softmax
# needle: second run
"""Stands in, on the CPU interpreter (where programs run in order and cannot race), for a race that
loses rarely: every tenth launch gets an extra program that scribbles on the first row. With seeds=2,
three input sets, the large-scale, near-duplicate and swapped trials, the tenth forward is the verifier's
repeat of the first trial; if the verifier's
call order changes, this file needs a new period."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, stride, n_rows, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = pid % n_rows
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    if pid >= n_rows:
        y = y * 0.5
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.launches = 0

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.launches += 1
        extra = 1 if self.launches % 10 == 0 else 0
        n_rows, n_cols = x.shape
        _softmax[(n_rows + extra,)](x, y, x.stride(0), n_rows, n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return y
