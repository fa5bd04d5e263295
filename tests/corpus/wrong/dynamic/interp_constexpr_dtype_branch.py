# expect: compile_error
# policy: off
# problem: softmax
# needle: sm_90a
"""A softmax 'kernel' that branches on a dtype constexpr: the branch the interpreter runs computes with
NumPy on the interpreter's own arrays (`x.handle.data`), the other is a plain copy. The sm_90a compile
check rebuilt the launch with the dtype described only by its type (None), so it compiled the copy and
passed (red-team review, 2026-12-03). Now a dtype constexpr is rebuilt as the dtype it was, and any value
the compile cannot rebuild makes the launch uncompilable; the static policy also flags `.handle`."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, MODE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    if MODE is None:
        tl.store(y_ptr + row * stride_y + cols, x, mask=mask)
    else:
        d = x.handle.data
        e = 2.718281828459045 ** (d - d.max())
        d[:] = e / e.sum()
        tl.store(y_ptr + row * stride_y + cols, x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        n_rows, n_cols = x2.shape
        softmax_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0),
                                  BLOCK=triton.next_power_of_2(n_cols), MODE=tl.float32)
        return y.view(x.shape)
