# expect: fallback_to_reference
# policy: on
# problem: softmax
# needle: host
"""Host compute the static policy cannot see: the tensor passes through a plain standard-library call
(`functools.reduce`), after which nothing proves the value is a tensor, so NumPy on it is not refused. The
softmax is done by NumPy on the host and a Triton copy kernel writes it out. The worker's host-read count
(the tensor's values handed to NumPy inside forward) rejects it on every device."""

import functools

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        hidden = functools.reduce(lambda acc, v: v, [x], None)
        a = np.asarray(hidden, dtype=np.float64)
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        host = torch.from_numpy((e / e.sum(axis=-1, keepdims=True)).astype(np.float32))
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 512),)](host, y, x.numel(), BLOCK=512)
        return y
