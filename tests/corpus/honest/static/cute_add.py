"""Elementwise add in CuTe DSL: one thread per element, compiled once per (dtype, shape) and cached."""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def _add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    m, n = gA.shape
    if i < m * n:
        gC[i // n, i % n] = gA[i // n, i % n] + gB[i // n, i % n]


@cute.jit
def _add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream: cuda.CUstream):
    m, n = mA.shape
    threads = 256
    _add_kernel(mA, mB, mC).launch(grid=((m * n + threads - 1) // threads, 1, 1), block=(threads, 1, 1), stream=stream)


def _to_cute(t: torch.Tensor):
    return from_dlpack(t, assumed_align=16)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._compiled = {}

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a2 = a.contiguous().view(-1, a.shape[-1])
        b2 = b.contiguous().view(-1, b.shape[-1])
        c2 = torch.empty_like(a2)
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        key = (a2.dtype, tuple(a2.shape))
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = cute.compile(_add, _to_cute(a2), _to_cute(b2), _to_cute(c2), stream)
            self._compiled[key] = compiled
        compiled(_to_cute(a2), _to_cute(b2), _to_cute(c2), stream)
        return c2.view(a.shape)


__all__ = ["ModelNew", "cutlass"]
