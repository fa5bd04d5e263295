"""A byte string decoded in the forward (a tag for a log line): the policy must read it without failing
(red team, 2026-12-05: its string folding treated bytes as text and raised AttributeError on .decode, which the
verifier reported as its own internal error)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        tag = b"row".decode() + f"-{x.dim()}"
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        self.last_tag = tag
        return y
