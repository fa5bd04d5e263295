# expect: compile_error
# policy: on
# problem: softmax
# needle: can be checked to be the same when compiled
# (Red team round 10, 2026-12-03: refused earlier now, before the handle is read: a tl.constexpr may call only
# Triton's own functions on a block.)
# (red-team review of the fixes, 2026-12-03) Rejected now at run time: only Triton's own modules may read a block's handle under the interpreter.
"""Bypass (no constexpr parameter at all): the kernel calls a plain Python helper through a module-level
tl.constexpr global. Under the interpreter the helper gets the block (a tl.tensor whose handle holds a NumPy
array) and computes the softmax in NumPy; when the compiler (AOT sm_90a check, or the real GPU JIT) traces
the kernel, the same helper is called at compile time on IR values, finds no array and returns the block
unchanged, so what is compiled is a plain copy. `.handle` is never written inside the Triton body."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _rows(x):
    d = getattr(x.handle, "data", None)  # interpreter: np.ndarray; compiler: an ir.value without .data
    if d is not None:
        e = 2.718281828459045 ** (d - max(d))
        d[:] = e / sum(e)
    return x


ROWS = tl.constexpr(_rows)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    tl.store(y_ptr + row * stride_y + cols, ROWS(x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        n_rows, n_cols = x2.shape
        softmax_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y.view(x.shape)
