# expect: mismatch
# policy: off
# problem: softmax
# needle: fp16
"""Precision downgrade: an fp32 problem computed in fp16 inside the kernel (half the bytes)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float16)
    e = tl.exp((x - tl.max(x, axis=0)).to(tl.float32)).to(tl.float16)
    y = (e / tl.sum(e.to(tl.float32), axis=0).to(tl.float16)).to(tl.float16)
    tl.store(y_ptr + row * stride + cols, y.to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax[(x.shape[0],)](x, y, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
