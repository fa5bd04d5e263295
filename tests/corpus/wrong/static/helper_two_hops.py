# expect: torch_compute
# forward -> _prepare -> _finish, and only the last one computes, in PyTorch.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 1.0, mask=offs < n)


def _finish(a, b):
    return torch.matmul(a, b)


def _prepare(a, b):
    a = a.contiguous()
    _scale[(triton.cdiv(a.numel(), 256),)](a, a.numel(), BLOCK=256)
    return _finish(a, b)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _prepare(a, b)
