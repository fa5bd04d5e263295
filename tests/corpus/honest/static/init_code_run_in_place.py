"""Construction code that runs functions where it is written: a generator consumed by a loop, a key lambda
given to sorted, a function picked and called at once. None of it is handed out to run later, so none of
it is forward code (the policy checks what is: test_policy's lazy_* cheats)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


def _sizes(n):
    for i in range(n):
        yield 2 ** i


def _double(v):
    return 2 * v


def _same(v):
    return v


class ModelNew(nn.Module):
    def __init__(self, scale: float = 2.0):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        nn.init.zeros_(self.proj.bias)
        widths = sorted((w for w in _sizes(4)), key=lambda w: -w)
        pick = _double if widths[0] > 4 else _same
        self.scale = pick(scale) / 2.0

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _scale_kernel[(triton.cdiv(n, 1024),)](x, out, n, self.scale, BLOCK=1024)
        return out
