# problem: add_backward
"""An honest x + y with gradients: a Triton kernel in forward, wrapped in an autograd.Function whose
backward hands the output's gradient to both inputs (no compute is needed there)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


class _Add(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class ModelNew(nn.Module):
    def forward(self, x, y):
        return _Add.apply(x, y)
