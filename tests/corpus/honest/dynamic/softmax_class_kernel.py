# expect: ok
# problem: softmax
# policy: on
"""Honest softmax whose kernel is an indented static method of a module-level class, with a docstring, a
multi-line signature and a multi-line autotune decorator: the interpreter's and the compiler's sources of it are
dedented from the `def`, and their positions must agree."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


class Kernels:
    @staticmethod
    @triton.autotune(
        configs=[triton.Config({}, num_warps=4),
                 triton.Config({}, num_warps=2)],
        key=["n_cols"],
    )
    @triton.jit
    def softmax(x_ptr, y_ptr,
                n_cols, stride,
                BLOCK: tl.constexpr):
        """One row per program."""
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n_cols
        v = tl.load(x_ptr + row * stride + offs, mask=mask, other=float("-inf"))
        e = tl.exp(v - tl.max(v, 0))
        tl.store(y_ptr + row * stride + offs, e / tl.sum(e, 0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        Kernels.softmax[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y
