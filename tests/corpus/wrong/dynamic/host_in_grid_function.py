# expect: fallback_to_reference
# policy: on
# problem: softmax
# needle: host
"""Host compute hidden in the launch itself: the grid is a function, which Triton calls while launching
(under the interpreter, inside the launch the worker wraps). It reads the input with NumPy, writes the
softmax into the output through a NumPy view, and returns the grid; the kernel only reloads and stores the
output. The tensors pass through `functools.reduce` first, so the policy cannot prove NumPy touches a
tensor. Host reads made anywhere during forward count, a launch's own included."""

import functools

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _again(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        src = functools.reduce(lambda _, v: v, [x], None)
        y = torch.empty_like(x)
        dst = functools.reduce(lambda _, v: v, [y], None)
        n = x.numel()

        def grid(meta):
            a = np.asarray(src, dtype=np.float64)
            e = np.exp(a - a.max(axis=-1, keepdims=True))
            np.asarray(dst)[...] = e / e.sum(axis=-1, keepdims=True)
            return (triton.cdiv(n, 256),)

        _again[grid](y, n, BLOCK=256)
        return y
