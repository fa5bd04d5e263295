"""Softmax in two launches: row statistics, then normalisation (a candidate that launches more than one kernel)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_stats_kernel(x_ptr, m_ptr, s_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    tl.store(m_ptr + row, m)
    tl.store(s_ptr + row, tl.sum(tl.exp(x - m), axis=0))


@triton.jit
def normalise_kernel(x_ptr, m_ptr, s_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    y = tl.exp(x - tl.load(m_ptr + row)) / tl.load(s_ptr + row)
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        m = torch.empty(n_rows, device=x.device, dtype=torch.float32)
        s = torch.empty_like(m)
        block = triton.next_power_of_2(n_cols)
        row_stats_kernel[(n_rows,)](x, m, s, n_cols, x.stride(0), BLOCK=block)
        normalise_kernel[(n_rows,)](x, m, s, y, n_cols, x.stride(0), BLOCK=block)
        return y
