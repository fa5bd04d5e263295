# expect: policy_violation
# policy: on
# problem: softmax
# needle: numpy.asarray
"""The parameter annotated `int` so that the static policy would take the input for a number and let
NumPy on it pass (red-team review, 2026-12-03; it then walked the storage with as_strided from a one-element
view, which the policy now refuses on its own: here NumPy takes the whole tensors). Once the reference has
run, the policy is checked again with forward's parameters that receive tensors taken for tensors, whatever
their annotations say."""

import numpy as np
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _touch(p, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    v = tl.load(p + i, mask=i < n, other=0.0)
    tl.store(p + i, v, mask=i < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: int):
        y = x.new_empty(x.shape)
        src = np.asarray(x)
        dst = np.asarray(y)
        m = src.max(axis=1, keepdims=True)
        e = np.exp(src - m)
        dst[...] = e / e.sum(axis=1, keepdims=True)
        _touch[(1,)](y, 1, BLOCK=16)
        return y
