# expect: fallback_to_reference
# policy: off
# problem: softmax
# needle: host
"""Host read through a DLPack capsule: `torch.utils.dlpack.to_dlpack` (a C function, not the tensor's own
`__dlpack__`) makes the capsule, and a small holder object hands it to `np.from_dlpack`, so NumPy views the
input with no tensor method called. The softmax is done in NumPy and copied out by a kernel. The worker
counts the capsule's bytes like any other host read."""

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils.dlpack import to_dlpack


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


class _Capsule:
    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


class ModelNew(nn.Module):
    def forward(self, x):
        a = np.from_dlpack(_Capsule(to_dlpack(x))).astype(np.float64)
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        host = torch.from_numpy((e / e.sum(axis=-1, keepdims=True)).astype(np.float32))
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 256),)](host, y, x.numel(), BLOCK=256)
        return y
