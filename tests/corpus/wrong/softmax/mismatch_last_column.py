"""A WRONG row softmax, kept to show that the verifier catches it. It is kernel.py with one bug: the
reduction mask is off by one, so the last column is left out of the row max and sum (its output is
0 and the others come out slightly too large). Do not use."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_FUSED_BLOCK = 32768  # widest row kept in registers (faster than looping up to here on an H200)
LOOP_BLOCK = 8192  # columns per step when a row does not fit


@triton.jit
def _softmax_row_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    in_row = cols < n_cols - 1  # BUG: should be `cols < n_cols`
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=in_row, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))  # padding: exp(-inf) = 0
    y = e * (1.0 / tl.sum(e, axis=0))
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_looped_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK)
    # Pass 1, online softmax: running max m and running sum s of exp(x - m), rescaled when m grows.
    m = tl.full([], -float("inf"), tl.float32)
    s = tl.zeros([], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols - 1  # BUG: should be `< n_cols`
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    inv = 1.0 / s
    # Pass 2: normalise and write.
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + cols, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(block: int) -> int:
    return min(max(block // 512, 4), 16)


def _softmax_2d(x: torch.Tensor, y: torch.Tensor) -> None:
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    if block <= MAX_FUSED_BLOCK:
        _softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                                       BLOCK=block, num_warps=_num_warps(block))
    else:
        _softmax_looped_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                                          BLOCK=LOOP_BLOCK, num_warps=_num_warps(LOOP_BLOCK))


class ModelNew(nn.Module):
    """Looks like softmax(x, dim=-1); drops the last column (see the module docstring)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        _softmax_2d(x2, y)
        return y.view(x.shape)
