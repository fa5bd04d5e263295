# expect: fallback_to_reference
# policy: on
# problem: softmax
# needle: single-element
"""Host compute element by element, out of the policy's loop rule: a recursive helper reads each value
with `.item()` (no loop in the function that calls it), and pure Python does the softmax. The recorder
counts every single-element read inside forward, on the CPU as on the GPU."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def _values(row, i, acc):
    if i == row.shape[0]:
        return acc
    acc.append(row[i].item())
    return _values(row, i + 1, acc)


def _soft(vals):
    top = max(vals)
    ex = [math.exp(v - top) for v in vals]
    total = sum(ex)
    return [v / total for v in ex]


class ModelNew(nn.Module):
    def forward(self, x):
        rows = [_soft(_values(x[r], 0, [])) for r in range(x.shape[0])]
        host = torch.tensor(rows, dtype=x.dtype)
        y = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 512),)](host, y, x.numel(), BLOCK=512)
        return y
