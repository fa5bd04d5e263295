# expect: torch_compute
# aten ops redispatched with a key set captured by a torch.library kernel registered with_keyset=True skip the op
# recorder (red team, 2026-12-05: accepted on 11 trials, torch reached through a dict key). `redispatch` and
# `with_keyset` are refused by name (the worker also records such calls: dynamic/redispatch_captured_keyset).
import torch
import torch.nn as nn
import triton
import triton.language as tl

_LIB = torch.library.Library("kagrab", "DEF")
_LIB.define("grab(Tensor x) -> Tensor")
_KS = []


def _grab(ks, x):
    _KS.append(ks)
    return x


_LIB.impl("grab", _grab, "CPU", with_keyset=True)

for _T in {torch: 0}:
    pass
_OPS = _T.ops.aten


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.ops.kagrab.grab(torch.empty(1))
        self.ks = _KS[0]

    def forward(self, x):
        ks = self.ks
        m = _OPS.amax.default.redispatch(ks, x, [-1], True)
        e = _OPS.exp.default.redispatch(ks, _OPS.sub.Tensor.redispatch(ks, x, m))
        t = _OPS.div.Tensor.redispatch(ks, e, _OPS.sum.dim_IntList.redispatch(ks, e, [-1], True))
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](t, y, x.numel(), BLOCK=1024)
        return y
