"""Rotary position embedding; the cos/sin tables are prepared once in __init__ with PyTorch."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, seq_len, stride_row, HALF: tl.constexpr):
    row = tl.program_id(0)  # one (batch, head, position) row of width 2 * HALF
    pos = row % seq_len
    offs = tl.arange(0, HALF)
    x1 = tl.load(x_ptr + row * stride_row + offs).to(tl.float32)
    x2 = tl.load(x_ptr + row * stride_row + HALF + offs).to(tl.float32)
    c = tl.load(cos_ptr + pos * HALF + offs)
    s = tl.load(sin_ptr + pos * HALF + offs)
    tl.store(y_ptr + row * stride_row + offs, (x1 * c - x2 * s).to(y_ptr.dtype.element_ty))
    tl.store(y_ptr + row * stride_row + HALF + offs, (x2 * c + x1 * s).to(y_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self, head_dim: int, max_seq_len: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        self.register_buffer("cos_table", angles.cos().contiguous(), persistent=False)
        self.register_buffer("sin_table", angles.sin().contiguous(), persistent=False)

    def forward(self, x):
        B, H, S, D = x.shape
        assert S <= self.cos_table.shape[0] and D == 2 * self.cos_table.shape[1]
        x_c = x.contiguous()
        y = torch.empty_like(x_c)
        cos = self.cos_table.to(device=x.device)
        sin = self.sin_table.to(device=x.device)
        _rope_kernel[(B * H * S,)](x_c, cos, sin, y, S, D, HALF=D // 2)
        return y
