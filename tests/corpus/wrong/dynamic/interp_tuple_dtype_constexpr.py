# expect: compile_error
# policy: off
# problem: softmax
# needle: sm_90a
# (red-team review of the fixes, 2026-12-03) Tuples are now rebuilt item by item (never as strings) (compile_error: the branch that ran does not compile).
"""Bypass of the constexpr fix through a tuple constexpr: describe_arg keeps a tuple as a list of its items
as they are, and the worker's result is written with json.dumps(default=str), so the AOT compile gets
MODES = ["fp32"] (a string) where the interpreter had (tl.float32,). The kernel branches on MODES[0]."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, MODES: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    if MODES[0] == "fp32":  # the compile's view: a string
        tl.store(y_ptr + row * stride_y + cols, x, mask=mask)
    else:  # the interpreter's view: tl.float32
        d = getattr(x, "hand" + "le").data
        e = 2.718281828459045 ** (d - max(d))
        d[:] = e / sum(e)
        tl.store(y_ptr + row * stride_y + cols, x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        n_rows, n_cols = x2.shape
        softmax_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n_cols),
                                  MODES=(tl.float32,))
        return y.view(x.shape)
