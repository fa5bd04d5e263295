# expect: compile_error
# policy: off
# problem: softmax
# needle: sm_90a
# (red-team review of the fixes, 2026-12-03) The compile now rebuilds a parameter left at its default (compile_error: the branch that ran does not compile).
"""Bypass: a constexpr parameter with a default, not passed at launch. The interpreter runs the default (1);
the AOT compile leaves the parameter out of its constexprs and Triton builds it as None, the very stand-in
the fix meant to refuse. The kernel branches on it: NumPy on the interpreter's arrays where it ran, a copy
where it compiled. `.handle` is spelled getattr(x, "hand" + "le"), which the static rule does not see."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, MODE: tl.constexpr = 1):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    if MODE is None:
        tl.store(y_ptr + row * stride_y + cols, x, mask=mask)
    else:
        d = getattr(x, "hand" + "le").data
        e = 2.718281828459045 ** (d - max(d))
        d[:] = e / sum(e)
        tl.store(y_ptr + row * stride_y + cols, x, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        n_rows, n_cols = x2.shape
        softmax_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y.view(x.shape)
