# problem: softmax
"""Honest softmax naming its accumulation dtype through getattr(tl, "float32") in the kernel, which Triton
compiles (getattr and hasattr are in its code generator's builtins): red team round 11 found round 10's call
wall refusing it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr, ACC: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    v = tl.load(x_ptr + row * stride + offs, mask=m, other=float("-inf")).to(getattr(tl, "float32"))  # noqa: B009
    v = v - tl.max(v, axis=0)
    e = tl.exp(v)
    tl.store(y_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols), ACC="float32")
        return y
