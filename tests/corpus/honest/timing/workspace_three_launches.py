# expect: ok
# policy: on
# problem: softmax_timing
# needle:
# gpu: yes
"""Three launches through a workspace kept between calls: row maxima, row sums, then the
normalised output. A reused workspace is honest: the output is new every call."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_max(x_ptr, m_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(m_ptr + row, tl.max(x, axis=0))


@triton.jit
def _row_sum(x_ptr, m_ptr, s_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(s_ptr + row, tl.sum(tl.exp(x - tl.load(m_ptr + row)), axis=0))


@triton.jit
def _normalise(x_ptr, m_ptr, s_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    y = tl.exp(x - tl.load(m_ptr + row)) / tl.load(s_ptr + row)
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.work = None

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        if self.work is None or self.work.shape[1] != rows or self.work.device != x.device:
            self.work = torch.empty(2, rows, device=x.device, dtype=torch.float32)
        y = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        _row_max[(rows,)](x, self.work[0], cols, x.stride(0), BLOCK=block)
        _row_sum[(rows,)](x, self.work[0], self.work[1], cols, x.stride(0), BLOCK=block)
        _normalise[(rows,)](x, self.work[0], self.work[1], y, cols, x.stride(0), BLOCK=block)
        return y
