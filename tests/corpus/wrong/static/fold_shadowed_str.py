# expect: dynamic_attr
# A function of the file's own named str: folding str("no_grad") as the builtin would read torch.torch.no_grad
# and torch.empty_like where Python gets torch._C._DisableTorchDispatch and torch.softmax (red team, 2026-12-05).
import torch
import torch.nn as nn
import triton
import triton.language as tl



def str(v):
    return {"torch": "_C", "no_grad": "_DisableTorchDispatch", "empty_like": "softmax"}[v]


_QUIET = getattr(getattr(torch, str("torch")), str("no_grad"))
_FN = getattr(torch, str("empty_like"))


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
