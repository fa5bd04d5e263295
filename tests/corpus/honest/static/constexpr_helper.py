"""Honest: a plain Python helper called inside a Triton kernel with compile-time values only; Triton runs it
while compiling, on the GPU as on CPU."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


def _rows_per_program(block):
    return max(1, 1024 // block)


@triton.jit
def scale_rows(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    rows_here = _rows_per_program(BLOCK)
    for r in range(rows_here):
        row = tl.program_id(0) * rows_here + r
        cols = tl.arange(0, BLOCK)
        mask = (cols < n_cols) & (row < n_rows)
        v = tl.load(x_ptr + row * n_cols + cols, mask=mask)
        tl.store(y_ptr + row * n_cols + cols, v * 3.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        per = max(1, 1024 // block)
        scale_rows[(triton.cdiv(rows, per),)](x, y, rows, cols, BLOCK=block)
        return y
