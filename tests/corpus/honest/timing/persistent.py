# expect: ok
# policy: on
# problem: softmax_timing
# needle:
# gpu: yes
"""A persistent kernel: one program per SM slot, looping over rows."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_persistent(x_ptr, y_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        base = row.to(tl.int64) * stride
        x = tl.load(x_ptr + base + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + base + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        programs = min(rows, 132 * 4) if x.is_cuda else min(rows, 4)
        _softmax_persistent[(programs,)](x, y, rows, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
        return y
