"""Cosine window applied per column: the window is built with NumPy in __init__, forward only launches.
Uses libdevice, which runs compiled (sm_90a) but not under the CPU interpreter."""

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _window_kernel(x_ptr, w_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    y = x * w * libdevice.rsqrt(1.0 + tl.math.exp2(-8.0))
    tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, n_cols: int):
        super().__init__()
        table = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n_cols) / max(n_cols - 1, 1))
        self.register_buffer("window", torch.from_numpy(table.astype(np.float32)))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        _window_kernel[(rows,)](x, self.window, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
        return out
