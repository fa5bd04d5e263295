# problem: softmax
"""Honest softmax using kernel-side Python features: if on scalars, range with block scalars, static_range,
device_print, print, static_print with an f-string of a constexpr, a jit helper with a data branch."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _clamp_hi(v, hi):
    if hi > 1e30:
        r = v
    else:
        r = tl.minimum(v, hi)
    return r


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 16)
    tl.static_print(f"BLOCK={BLOCK}")
    row = tl.program_id(0)
    if row == 1000000:
        tl.device_print("row", row)
        print("never", row)
    m_run = float("-inf")
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=float("-inf"))
        m_run = tl.maximum(m_run, tl.max(v, 0))
    s = 0.0
    for start in tl.range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=float("-inf"))
        s += tl.sum(tl.exp(v - m_run), 0)
    if s > 0:
        inv = 1.0 / s
    else:
        inv = 0.0
    for _k in tl.static_range(2):
        inv = inv * 1.0
    inv = _clamp_hi(inv, 3.0e38)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=float("-inf"))
        tl.store(y_ptr + row * stride + offs, tl.exp(v - m_run) * inv, mask=offs < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=32)
        return y
