# expect: torch_compute
# functools.reduce handed operator.add and a list of the inputs: PyTorch adds them (red-team review, 2026-12-03).
import functools
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _zero(p, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x, y):
        scratch = torch.empty(16, device=x.device)
        _zero[(1,)](scratch, 16, BLOCK=16)
        return functools.reduce(operator.add, [x, y])
