# problem: relu
"""Honest: the activation is a @triton.jit function passed as a constexpr (a common Triton pattern)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu(x):
    return tl.maximum(x, 0.0)


@triton.jit
def act_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, ACT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, ACT(tl.load(x_ptr + offs, mask=m)), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        act_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024, ACT=relu)
        return y
