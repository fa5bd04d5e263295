# expect: fallback_to_reference
# policy: off
# problem: softmax
# needle: host
"""Host read through pickling: a storage's `__reduce__` serialises its bytes (C code, no tensor method, no
aten op), and NumPy reads the input back out of them. The softmax is done in NumPy and copied out by a
kernel. The worker counts a storage's serialisation as a read of all its bytes."""

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
        store = x.untyped_storage()
        blob = store.__reduce__()[1][0]
        flat = np.frombuffer(blob[len(blob) - store.nbytes():], dtype=np.float32)
        a = flat[x.storage_offset():x.storage_offset() + x.numel()].reshape(x.shape).astype(np.float64)
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        host = torch.from_numpy((e / e.sum(axis=-1, keepdims=True)).astype(np.float32))
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 256),)](host, y, x.numel(), BLOCK=256)
        return y
