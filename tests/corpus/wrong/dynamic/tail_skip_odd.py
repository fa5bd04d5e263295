# expect: stale_memory
# policy: off
# problem: relu
# needle: never written
"""Disguised tail skip: BLOCK=128 divides the main input (384 elements), so the main trial is fully
written; only the odd test sizes (385 and 1000 elements) leave their tail unwritten."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs), 0.0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _relu[(x.numel() // 128,)](x, y, BLOCK=128)
        return y
