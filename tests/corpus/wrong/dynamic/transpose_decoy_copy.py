# expect: fallback_to_reference
# policy: off
# problem: transpose
# needle: copies of the input data
"""The answer made by PyTorch's allowed copy ops (a transposed view made contiguous), beside a kernel that
writes zeros into a scratch buffer so that a launch is counted: the output holds input data that no kernel
was ever given."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _zero(p, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty(16, device=x.device)
        _zero[(1,)](scratch, 16, BLOCK=16)
        return x.t().contiguous()
