# expect: stale_memory
# policy: off
# problem: relu
# needle: never written
"""The grid is rounded down (n // BLOCK), so the last partial block of the output is never written;
BLOCK=256 leaves part of even the main input (384 elements) unwritten."""

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
        n = x.numel()
        _relu[(n // 256,)](x, y, BLOCK=256)
        return y
