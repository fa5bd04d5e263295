# expect: compile_only
# policy: on
# problem: softmax
# needle: correctness NOT run
"""A file with a Triton kernel that writes zeros as the output and a CuTe DSL kernel that does nothing: a file
that imports `cutlass` is a CuTe candidate, and without a GPU a CuTe candidate is compiled, never run, so no
output is compared (red-team review, 2026-12-03: "accepted (compile only)"). It must be `unverified`, never
accepted."""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
import triton
import triton.language as tl
from cutlass.cute.runtime import from_dlpack


@triton.jit
def _zeros(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


@cute.kernel
def _nothing(g: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()


@cute.jit
def _launch(m: cute.Tensor, stream: cuda.CUstream):
    _nothing(m).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = out.numel()
        _zeros[(triton.cdiv(n, 256),)](out, n, BLOCK=256)
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        cute.compile(_launch, from_dlpack(out), stream)(from_dlpack(out), stream)
        return out


__all__ = ["ModelNew", "cutlass"]
