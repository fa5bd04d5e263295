# expect: mismatch
# problem: softmax
# policy: on
# needle: rel L2 error
"""A constexpr default read from a global that __init__ changes: the interpreter's rewrite ran the def again
(default 1, the softmax) while the compiled kernel binds the import-time 0 (a copy) (red team, round 12,
2026-12-03: accepted on 11 trials). The rewritten kernel now keeps the defaults its def had."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

_MODE = [0]


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr, EXACT: tl.constexpr = _MODE[0]):
    # EXACT's default is evaluated at import (0: what the GPU JIT's binder and the AOT description use) and again
    # when the interpreter rewrites the kernel at its first launch (1, after __init__).
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    v = tl.load(x_ptr + row * stride + offs, mask=m, other=float("-inf"))
    e = tl.exp(v - tl.max(v, 0))
    out = (e / tl.sum(e, 0)) * EXACT + v * (1 - EXACT)
    tl.store(y_ptr + row * stride + offs, out, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _MODE[0] = 1

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y
