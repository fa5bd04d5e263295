# expect: torch_compute
# torch reached through a generator, which the name resolution does not follow, then ._C._DisableTorchDispatch: the
# Python dispatch key off, torch.softmax runs where the op recorder does not see it (red team, 2026-12-05: accepted
# on 11 trials). The dispatch machinery is refused by name, whatever the object it is read from.
import torch
import torch.nn as nn
import triton
import triton.language as tl

def _gen():
    yield torch


for _T in _gen():
    pass
_QUIET = _T._C._DisableTorchDispatch
_FN = _T.softmax


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        with _QUIET():
            t = _FN(x, -1)
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](t, y, x.numel(), BLOCK=1024)
        return y
