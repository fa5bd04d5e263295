# expect: dynamic_attr
# f"{'x'!r}" is "'x'": a fold that dropped the conversion read these names as allowed ones, where Python gets
# torch._C._DisableTorchDispatch and torch.softmax (red team, 2026-12-05).
import torch
import torch.nn as nn
import triton
import triton.language as tl

_NS = (f"{'torch'!r}".removeprefix("'torch").removesuffix("'")
       + f"{'_C'!r}".removeprefix("_C").removeprefix("'").removesuffix("'"))
_CM = (f"{'no_grad'!r}".removeprefix("'no_grad").removesuffix("'")
       + f"{'_DisableTorchDispatch'!r}".removeprefix("_DisableTorchDispatch").removeprefix("'").removesuffix("'"))
_QUIET = getattr(getattr(torch, _NS), _CM)
_SM = (f"{'empty_like'!r}".removeprefix("'empty_like").removesuffix("'")
       + f"{'softmax'!r}".removeprefix("softmax").removeprefix("'").removesuffix("'"))
_FN = getattr(torch, _SM)


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
