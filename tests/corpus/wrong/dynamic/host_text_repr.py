# expect: fallback_to_reference
# policy: off
# problem: softmax_cases
# needle: host
"""The red team's host softmax (2026-12-03), for the worker's walls alone: every element's bits read back
from str() of a one-element int view and parsed, the softmax computed in `math`, a copy kernel launched for
show. torch's printer runs with PyTorch's dispatch modes off, so the op recorder saw no read; the worker now
counts each tensor turned into text as a read of its values, and Tensor.item & co. whatever the modes."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def bits_to_float(b):
    b &= 0xFFFFFFFF
    sign = -1.0 if b >> 31 else 1.0
    e, m = (b >> 23) & 0xFF, b & 0x7FFFFF
    if e == 0:
        return sign * math.ldexp(m, -149)
    if e == 255:
        return sign * math.inf if m == 0 else math.nan
    return sign * math.ldexp(m | 0x800000, e - 150)


def read_value(t):
    text = str(t.view(torch.int32))
    return bits_to_float(int(text.split("(")[1].split(",")[0].split(")")[0]))


class ModelNew(nn.Module):
    def forward(self, x):
        n_rows, n_cols = x.shape
        rows = []
        for i in range(n_rows):
            vals = [read_value(x[i, j]) for j in range(n_cols)]
            top = max(vals)
            exps = [math.exp(v - top) for v in vals]
            total = math.fsum(exps)
            rows.append([e / total for e in exps])
        host = torch.tensor(rows, dtype=torch.float32)
        y = torch.empty_like(x)
        n = n_rows * n_cols
        copy_kernel[(triton.cdiv(n, 256),)](host, y, n, BLOCK=256)
        return y
