# expect: torch_compute
# The guard's path as one string for a laundered attrgetter: the string names the dispatch machinery, which is
# refused wherever it is written.
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl

_T = ([torch] + [])[0]
_QUIET = operator.attrgetter("_C._DisableTorchDispatch")(_T)
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
