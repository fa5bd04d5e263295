# expect: compile_error
# problem: softmax
# policy: on
# needle: NumPy int64
"""A constexpr np.int64: the GPU JIT keeps the NumPy type (its shifts wrap), the AOT compile rebuilt a Python int,
so the compile checked another kernel than the one the GPU runs (red team, round 12, 2026-12-03: accepted on 11
trials with a type selector). A NumPy constexpr is refused with a hint."""
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    v = tl.load(x_ptr + row * stride + offs, mask=m, other=float("-inf"))
    out = v
    # interpreter: type(BLOCK) is int -> True.  AOT: WIDE rebuilt as a Python int: (64 << 60) >> 60 == 64 -> True.
    # GPU JIT: WIDE stays np.int64 (wraps): False or False -> a copy.
    if tl.core.builtins.type(BLOCK) is int or ((WIDE << 60) >> 60) == WIDE:
        e = tl.exp(v - tl.max(v, 0))
        out = e / tl.sum(e, 0)
    tl.store(y_ptr + row * stride + offs, out, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols), WIDE=np.int64(64))
        return y
