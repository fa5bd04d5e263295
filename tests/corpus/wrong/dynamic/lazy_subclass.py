# expect: mismatch
# policy: off
# problem: softmax
# needle: plain torch.Tensor
"""Deferred work: returns a tensor subclass that holds the input and computes the softmax in PyTorch
only when the checker first touches it (outside forward, so no op is recorded during forward)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _touch(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


class Deferred(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        args = tuple(torch.softmax(a.as_subclass(torch.Tensor), -1) if isinstance(a, Deferred) else a
                     for a in args)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        probe = torch.empty(16, dtype=x.dtype, device=x.device)
        _touch[(1,)](x, probe, BLOCK=16)
        return x.as_subclass(Deferred)
