"""RMSNorm in CuTe DSL, one CTA per row: an op object holds the static settings, as in quack's kernels."""

import operator

import cutlass
import cutlass.cute as cute
import cutlass.torch as cutlass_torch
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

_TORCH_TO_CUTE = {torch.float32: cutlass.Float32, torch.float16: cutlass.Float16, torch.bfloat16: cutlass.BFloat16}


class _RMSNormOp:
    def __init__(self, dtype, n_cols: int, threads: int = 128):
        self.dtype = dtype
        self.n_cols = n_cols
        self.threads = threads

    @cute.jit
    def __call__(self, mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32, stream):
        rows = mX.shape[0]
        self.kernel(mX, mW, mY, eps).launch(grid=(rows, 1, 1), block=(self.threads, 1, 1), stream=stream)

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        smem = cutlass.utils.SmemAllocator()
        partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout(self.threads))
        acc = cutlass.Float32(0.0)
        for col in range(tidx, self.n_cols, self.threads):
            v = mX[row, col].to(cutlass.Float32)
            acc += v * v
        partial[tidx] = acc
        cute.arch.sync_threads()
        total = cutlass.Float32(0.0)
        for j in cutlass.range_constexpr(self.threads):
            total += partial[j]
        rstd = cute.math.rsqrt(total / self.n_cols + eps)
        for col in range(tidx, self.n_cols, self.threads):
            w = mW[col].to(cutlass.Float32)
            mY[row, col] = (mX[row, col].to(cutlass.Float32) * rstd * w).to(self.dtype)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self._cache = {}

    def _compiled(self, x2, w, y, stream):
        key = (x2.dtype, x2.shape[1])
        if key not in self._cache:
            op = _RMSNormOp(_TORCH_TO_CUTE[x2.dtype], x2.shape[1])
            args = (from_dlpack(x2), from_dlpack(w), from_dlpack(y), cutlass.Float32(self.eps), stream)
            self._cache[key] = cute.compile(op, *args)
        return self._cache[key]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        rows = operator.floordiv(x.numel(), n_cols)
        x2 = x.contiguous().view(rows, n_cols)
        w = self.weight.to(dtype=x.dtype).contiguous()
        y = torch.empty_like(x2)
        stream = cutlass_torch.current_stream()
        fn = self._compiled(x2, w, y, stream)
        fn(from_dlpack(x2), from_dlpack(w), from_dlpack(y), cutlass.Float32(self.eps), stream)
        return y.view(x.shape)
