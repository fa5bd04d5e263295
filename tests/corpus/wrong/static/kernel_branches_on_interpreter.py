# expect: introspection
# Red team round 9 (2026-12-03, accepted): the kernel branches on triton.knobs.runtime.interpret, running Python
# on the values under the interpreter and a copy when compiled.
"""Round 9: Python inside the kernel itself, in a branch on a module-level constexpr that is True under the
interpreter and False in the AOT compile: the conversion guard allows the kernel's own (rewritten) code."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

INTERP = tl.constexpr(triton.knobs.runtime.interpret)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    v = tl.load(x_ptr + row * stride + offs, mask=m, other=float("-inf"))
    out = v
    if INTERP:
        out = v * 0.0
        for vals in [[float(w) for w in str(v).replace("[", " ").replace("]", " ").split()]]:
            for top in [max(vals)]:
                for ex in [[2.718281828459045 ** (a - top) for a in vals]]:
                    for s in [sum(ex)]:
                        for j in range(BLOCK):
                            out = out + (offs == j).to(tl.float32) * (ex[j] / s)
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
