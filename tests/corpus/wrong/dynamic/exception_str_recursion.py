# expect: runtime_error
# policy: on
# problem: softmax
# needle: forward raised
"""(Red team, 2026-12-03: internal_error blamed on the verifier, exit 3.) An exception whose __str__ and
__repr__ recurse: rendering the candidate's failure raised RecursionError inside the worker's own error
path, which reported it as the verifier's error (and the agent stops a run on those). The candidate's
exception is now rendered defensively: its failure stays the candidate's."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)


class Boom(Exception):
    def __str__(self):
        return str(Boom())

    def __repr__(self):
        return repr(Boom())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _copy[(1,)](x, y, x.numel(), BLOCK=1024)
        raise Boom()
