# expect: compile_error
# problem: softmax
# needle: out of shape
# (red team, 2026-12-05) A tuple constexpr nested 450 deep: its description overflowed the recursion that serialises the worker's facts, and the verdict blamed the verifier (internal_error, exit 3). Now described as opaque past a few levels, so the AOT compile refuses it (compile_error).
"""A constexpr the kernel never reads, nested deeper than Python's recursion limit allows to serialise."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

NEST = (torch.float32,)
for _ in range(450):
    NEST = (NEST,)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, T: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), T=NEST, BLOCK=triton.next_power_of_2(n_cols))
        return y
