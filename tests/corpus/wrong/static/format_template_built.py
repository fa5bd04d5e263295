# expect: introspection
# The template of str.format built at run time from pieces, and the format method taken by getattr:
# `{0.modules}` reaches sys.modules as text; a template the policy cannot read is refused too.
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)


class ModelNew(nn.Module):
    def forward(self, x):
        template = "{0" + ".mod" + "ules}"
        text = getattr(template, "format")(sys)
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), B=1024)
        if "torch" in text:
            y.add_(0)
        return y
