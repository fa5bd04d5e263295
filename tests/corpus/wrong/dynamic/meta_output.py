# expect: mismatch
# policy: off
# problem: relu
# needle: meta tensor
"""Launches a real kernel into scratch, then returns a tensor on the meta device: there are no values to
compare. The harness must say so as the candidate's mismatch, not fail on it as its own error."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask, other=0.0), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return torch.empty(x.shape, dtype=x.dtype, device="meta")
