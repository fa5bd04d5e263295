# expect: introspection
# str.format reached through a stored operator.methodcaller and applied later by a dataclass's default_factory:
# no `.format` attribute node, and the template a plain constant elsewhere (red-team review 5 walked the
# worker's frames to the timing plan's key this way). The getter's names are checked where it is made.
import dataclasses
import functools
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl

TEMPLATE = "{0.__traceback__.tb_frame.f_back}"


@triton.jit
def _copy(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            raise ValueError("x")
        except ValueError as err:
            caught = err
        reader = functools.partial(operator.methodcaller("format", caught), TEMPLATE)

        @dataclasses.dataclass
        class Box:
            s: object = dataclasses.field(default_factory=reader)
        self.seen = str(Box().s)
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), B=1024)
        return y
