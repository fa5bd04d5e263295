# expect: fallback_to_reference
# policy: off
# problem: add_backward
# needle: aten.add
"""In a BACKWARD problem, PyTorch adds the inputs in forward (functools.reduce over operator.add) and torch's
own AddBackward makes the gradients; a decoy kernel runs, and the real one only when autograd is off (the
cache probe). The recorder forgave up to one aten.add a gradient leaf as the autograd engine's sum, counted
over forward and backward together (red-team review, 2026-12-03); the engine's sums happen in the backward,
so only additions dispatched there are forgiven now."""

import functools
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def _zero(p, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x, y):
        if x.requires_grad:
            scratch = torch.empty(16, device=x.device)
            _zero[(1,)](scratch, 16, BLOCK=16)
            return functools.reduce(operator.add, [x, y])
        out = torch.empty_like(x)
        n = x.numel()
        _add[(triton.cdiv(n, 1024),)](x.contiguous(), y.contiguous(), out, n, BLOCK=1024)
        return out
