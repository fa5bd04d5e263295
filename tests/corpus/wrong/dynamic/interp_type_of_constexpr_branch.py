# expect: compile_error
# problem: softmax
# policy: on
# needle: ran under the interpreter but is not in the kernel compiled for the GPU
"""Inside the kernel, `type(BLOCK) is int` tells the interpreter (a constexpr argument arrives as a plain int)
from the compiler (a `tl.constexpr`): `type` is a class, not a C function, so the call hook never sees it, and
the selected branch computes the softmax with Triton operations alone. Compiled for the GPU the branch is
dropped and the kernel copies its input. Written 2026-12-03 against the walls of red-team round 11 (accepted
on CPU before the line wall): the interpreter ran lines the compile never generated."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    v = tl.load(x_ptr + row * stride + offs, mask=m, other=float("-inf"))
    out = v
    if tl.core.builtins.type(BLOCK) is int:
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
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y
