# problem: softmax
"""An honest softmax whose kernel takes the output dtype as a `tl.constexpr` (tl.float32): the sm_90a compile
check must rebuild that value, not a stand-in (a None there made `.to(OUT)` fail to compile)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, OUT: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, (e / tl.sum(e, axis=0)).to(OUT), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        n_rows, n_cols = x2.shape
        out = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}[x.dtype]
        _softmax[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n_cols), OUT=out)
        return y.view(x.shape)
