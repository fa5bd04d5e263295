# expect: try_around_kernel
# contextlib.suppress instead of try/except.
import contextlib

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = x.clone()
        with contextlib.suppress(Exception):
            _k[(triton.cdiv(y.numel(), 256),)](y, y.numel(), BLOCK=256)
        return y
