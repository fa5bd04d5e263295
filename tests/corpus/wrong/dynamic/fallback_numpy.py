# expect: fallback_to_reference
# policy: off
# problem: softmax
# needle: NumPy
"""Fallback below the aten dispatcher: the softmax is computed in NumPy on the host and copied into the
output by a Triton copy kernel; the only aten ops are allocation and copies."""

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        host = x.detach().cpu().numpy()
        e = np.exp(host - host.max(axis=-1, keepdims=True))
        staged = torch.from_numpy(e / e.sum(axis=-1, keepdims=True)).to(x.device)
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 256),)](staged, y, x.numel(), BLOCK=256)
        return y
