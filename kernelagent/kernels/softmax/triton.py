"""Row softmax (last dimension) in Triton, forward and backward, registered as torch custom ops.

One program per row. A row that fits in registers is read once; a wider row takes two passes over
column blocks (online max/sum, then the write). fp32 math, outputs in the input's dtype.
Order: kernels -> launchers -> custom ops -> autograd -> public API.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Widest rows kept in registers; wider rows loop over LOOP_BLOCK columns. Measured on an H200
# (rows of 16k and 32k columns): the forward is faster fused up to 32768 columns, the backward
# (two row arrays live) only up to 16384.
MAX_FUSED_FWD = 32768
MAX_FUSED_BWD = 16384
LOOP_BLOCK = 8192


# ------------------------------------------------------------------------------------- kernels


@triton.jit
def _softmax_fwd_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))  # padding: exp(-inf) = 0
    y = e * (1.0 / tl.sum(e, axis=0))
    tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_fwd_looped_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    cols = tl.arange(0, BLOCK)
    # online softmax: running max m and running sum s of exp(x - m), rescaled when m grows
    m = tl.full([], -float("inf"), tl.float32)
    s = tl.zeros([], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    inv = 1.0 / s
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + cols, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd_kernel(y_ptr, dy_ptr, dx_ptr, n_cols, y_stride, dy_stride, dx_stride, BLOCK: tl.constexpr):
    # dx = y * (dy - sum(y * dy))
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * y_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dx = y * (dy - tl.sum(y * dy, axis=0))
    tl.store(dx_ptr + row * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd_looped_kernel(y_ptr, dy_ptr, dx_ptr, n_cols, y_stride, dy_stride, dx_stride,
                               BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    y_row = y_ptr + row * y_stride
    dy_row = dy_ptr + row * dy_stride
    dx_row = dx_ptr + row * dx_stride
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        y = tl.load(y_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        acc += y * dy
    dot = tl.sum(acc, axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        y = tl.load(y_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(dx_row + start + cols, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------------------------ launchers


def _num_warps(block: int) -> int:
    return min(max(block // 512, 4), 16)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """A 2-D [rows, cols] view with unit column stride (copies only when the last dim is strided)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _launch_fwd(x: torch.Tensor, y: torch.Tensor) -> None:
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    if block <= MAX_FUSED_FWD:
        _softmax_fwd_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block,
                                       num_warps=_num_warps(block))
    else:
        _softmax_fwd_looped_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=LOOP_BLOCK,
                                              num_warps=_num_warps(LOOP_BLOCK))


def _launch_bwd(y: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor) -> None:
    n_rows, n_cols = y.shape
    block = triton.next_power_of_2(n_cols)
    strides = (y.stride(0), dy.stride(0), dx.stride(0))
    if block <= MAX_FUSED_BWD:
        _softmax_bwd_kernel[(n_rows,)](y, dy, dx, n_cols, *strides, BLOCK=block, num_warps=_num_warps(block))
    else:
        _softmax_bwd_looped_kernel[(n_rows,)](y, dy, dx, n_cols, *strides, BLOCK=LOOP_BLOCK,
                                              num_warps=_num_warps(LOOP_BLOCK))


# ----------------------------------------------------------------------------------- custom ops


def _register(name: str, impl, fake):
    """`impl` as the torch custom op `kernelagent::<name>`, with `fake` for shape propagation.

    Registered once per process: a second copy of this file (imported by path) reuses the first.
    """
    if hasattr(torch.ops.kernelagent, name):
        return getattr(torch.ops.kernelagent, name)
    op = torch.library.custom_op(f"kernelagent::{name}", impl, mutates_args=())
    op.register_fake(fake)
    return op


def _softmax_fwd_impl(x: torch.Tensor) -> torch.Tensor:
    x2 = _rows(x)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _launch_fwd(x2, y)
    return y.view(x.shape)


def _softmax_bwd_impl(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y2, dy2 = _rows(y), _rows(dy)
    dx = torch.empty(y2.shape, dtype=y.dtype, device=y.device)
    _launch_bwd(y2, dy2, dx)
    return dx.view(y.shape)


def _softmax_fwd_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _softmax_bwd_fake(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(y, memory_format=torch.contiguous_format)


softmax_fwd = _register("softmax_fwd", _softmax_fwd_impl, _softmax_fwd_fake)
softmax_bwd = _register("softmax_bwd", _softmax_bwd_impl, _softmax_bwd_fake)


def _compiling() -> bool:
    # Eager calls skip the custom-op dispatcher (about 35 us of CPU per call, measured on the H200
    # host); torch.compile traces the registered ops.
    return torch.compiler.is_compiling()


# ------------------------------------------------------------------------------------- autograd


class _SoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = softmax_fwd(x) if _compiling() else _softmax_fwd_impl(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return softmax_bwd(y, dy) if _compiling() else _softmax_bwd_impl(y, dy)


# ----------------------------------------------------------------------------------- public API


def softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax over the last dimension, differentiable; fp32, fp16 or bf16 in, same dtype out."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _SoftmaxFunction.apply(x)
    return softmax_fwd(x) if _compiling() else _softmax_fwd_impl(x)


class ModelNew(nn.Module):
    """Matches reference.py's Model: softmax(x, dim=-1)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x)
