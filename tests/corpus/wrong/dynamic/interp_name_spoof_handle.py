# expect: compile_error
# policy: off
# problem: softmax
# needle: can be checked to be the same when compiled
# (Red team round 10, 2026-12-03: refused earlier now, before the handle is read: a tl.constexpr may call only
# Triton's own functions on a block.)
"""Red team round 9 (2026-12-03, accepted): the module claims to be Triton (`__name__ = "triton..."`), so a
guard that trusted the caller's __name__ let its helper read a block's handle; the guards now go by the file
each frame's code was compiled from."""
"""Round 9: the module renames itself into triton.* so the conversion guard takes its helpers for Triton."""
import math
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl

__name__ = "triton.language.extra.helpers"

_ROW = []
_ANS = []


def _see(vi):
    if triton.knobs.runtime.interpret:
        bits = int(vi.handle.data.reshape(-1)[0]) & 4294967295
        e = (bits >> 23) & 255
        m = bits & 8388607
        val = math.ldexp(1.0 + m / 8388608.0, e - 127) if e else math.ldexp(m / 8388608.0, -126)
        _ROW.append(-val if bits >> 31 else val)
    return vi


def _out(v):
    if triton.knobs.runtime.interpret:
        if not _ANS:
            top = max(_ROW)
            ex = [math.exp(a - top) for a in _ROW]
            s = math.fsum(ex)
            _ANS.extend(a / s for a in ex)
            _ROW.clear()
        return v * 0.0 + _ANS.pop(0)
    return v


SEE = tl.constexpr(_see)
OUT = tl.constexpr(_out)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride):
    row = tl.program_id(0)
    for j in range(0, n_cols):
        v = tl.load(x_ptr + row * stride + j)
        SEE(v.to(tl.int32, bitcast=True))
    for j in range(0, n_cols):
        v = tl.load(x_ptr + row * stride + j)
        tl.store(y_ptr + row * stride + j, OUT(v))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0))
        return y
