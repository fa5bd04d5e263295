"""RMSNorm (last dimension, learned weight) in Triton, forward and backward, as torch custom ops.

Forward: one program per row, y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps) kept (fp32) for
the backward. Backward: a fixed grid of programs, each owning a contiguous run of rows; it writes
dx row by row and keeps its share of dw in fp32, then a second kernel sums the shares column-wise
in a fixed order (deterministic, no atomics). Rows too wide for registers loop over columns.
Order: kernels -> launchers -> custom ops -> autograd -> public API.
"""

from __future__ import annotations

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Widest rows kept in registers; wider rows loop over LOOP_BLOCK columns. The backward keeps two
# rows of x and dy (current and prefetched) plus w and dw: wider than 8192 it spilled on an H200.
MAX_FUSED_FWD = 16384
MAX_FUSED_BWD = 8192
LOOP_BLOCK = 4096
DW_BLOCK = 256  # columns per program when summing the dw shares


# ------------------------------------------------------------------------------------- kernels


@triton.jit
def _rms_norm_fwd_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_cols, x_stride, y_stride, eps,
                         BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * y_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_fwd_looped_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_cols, x_stride, y_stride, eps,
                                BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    cols = tl.arange(0, BLOCK)
    sq = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        sq += x * x
    rstd = tl.rsqrt(tl.sum(sq, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_bwd_kernel(x_ptr, w_ptr, dy_ptr, rstd_ptr, dx_ptr, dw_part_ptr, n_rows, n_cols,
                         x_stride, dy_stride, dx_stride, rows_per_program, BLOCK: tl.constexpr):
    # xhat = x * rstd;  dx = rstd * (w*dy - xhat * mean(w*dy*xhat));  dw = sum_rows(dy * xhat)
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], tl.float32)
    first = pid.to(tl.int64) * rows_per_program  # int64 rows: row * stride may pass 2**31
    last = tl.minimum(first + rows_per_program, n_rows)
    x = tl.load(x_ptr + first * x_stride + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + first * dy_stride + cols, mask=mask, other=0.0)
    for row in range(first, last):
        # prefetch the next row while this one is reduced (the loop is latency-bound otherwise)
        has_next = mask & (row + 1 < last)
        x_next = tl.load(x_ptr + (row + 1) * x_stride + cols, mask=has_next, other=0.0)
        dy_next = tl.load(dy_ptr + (row + 1) * dy_stride + cols, mask=has_next, other=0.0)
        rstd = tl.load(rstd_ptr + row)
        xhat = x.to(tl.float32) * rstd
        dyf = dy.to(tl.float32)
        wdy = w * dyf
        c = tl.sum(wdy * xhat, axis=0) / n_cols
        tl.store(dx_ptr + row * dx_stride + cols, ((wdy - xhat * c) * rstd).to(dx_ptr.dtype.element_ty),
                 mask=mask)
        dw += dyf * xhat
        x = x_next
        dy = dy_next
    tl.store(dw_part_ptr + pid.to(tl.int64) * n_cols + cols, dw, mask=mask)


@triton.jit
def _rms_norm_bwd_looped_kernel(x_ptr, w_ptr, dy_ptr, rstd_ptr, dx_ptr, dw_part_ptr, n_rows, n_cols,
                                x_stride, dy_stride, dx_stride, rows_per_program, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    dw_row = dw_part_ptr + pid.to(tl.int64) * n_cols  # this program's own share: no other writer
    for start in range(0, n_cols, BLOCK):
        tl.store(dw_row + start + cols, tl.zeros([BLOCK], tl.float32), mask=start + cols < n_cols)
    first = pid.to(tl.int64) * rows_per_program  # int64 rows: row * stride may pass 2**31
    for row in range(first, tl.minimum(first + rows_per_program, n_rows)):
        rstd = tl.load(rstd_ptr + row)
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            x = tl.load(x_ptr + row * x_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + row * dy_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            acc += w * dy * x
        c = tl.sum(acc, axis=0) * rstd / n_cols
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            x = tl.load(x_ptr + row * x_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + row * dy_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            xhat = x * rstd
            dx = (w * dy - xhat * c) * rstd
            tl.store(dx_ptr + row * dx_stride + start + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw = tl.load(dw_row + start + cols, mask=mask, other=0.0)
            tl.store(dw_row + start + cols, dw + dy * xhat, mask=mask)


@triton.jit
def _column_sum_kernel(part_ptr, out_ptr, n_parts, n_cols, BLOCK: tl.constexpr):
    # out[c] = sum_p part[p, c], summed in order p = 0, 1, ... (the same bits on every run)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    acc = tl.zeros([BLOCK], tl.float32)
    for p in range(0, n_parts):
        acc += tl.load(part_ptr + p * n_cols + cols, mask=mask, other=0.0)
    tl.store(out_ptr + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------------------------ launchers


def _num_warps(block: int) -> int:
    return min(max(block // 512, 4), 16)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """A 2-D [rows, cols] view with unit column stride (copies only when the last dim is strided)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _bwd_programs(x: torch.Tensor, block: int) -> int:
    """How many backward programs (dw shares): per SM, two for rows up to 4096 wide, else one
    (the best of 1/2/4 on an H200); a few under the interpreter."""
    per_sm = 2 if block <= 4096 else 1
    target = per_sm * _sm_count(x.device.index or 0) if x.device.type == "cuda" else 4
    return max(1, min(x.shape[0], target))


def _launch_fwd(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, rstd: torch.Tensor, eps: float) -> None:
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    args = (x, w, y, rstd, n_cols, x.stride(0), y.stride(0), eps)
    if block <= MAX_FUSED_FWD:
        _rms_norm_fwd_kernel[(n_rows,)](*args, BLOCK=block, num_warps=_num_warps(block))
    else:
        _rms_norm_fwd_looped_kernel[(n_rows,)](*args, BLOCK=LOOP_BLOCK, num_warps=_num_warps(LOOP_BLOCK))


def _launch_bwd(x, w, dy, rstd, dx, dw) -> None:
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    rows_per_program = max(1, triton.cdiv(n_rows, _bwd_programs(x, block)))  # no rows: dw = 0
    programs = triton.cdiv(n_rows, rows_per_program)
    dw_part = torch.empty((programs, n_cols), dtype=torch.float32, device=x.device)
    args = (x, w, dy, rstd, dx, dw_part, n_rows, n_cols, x.stride(0), dy.stride(0), dx.stride(0),
            rows_per_program)
    if block <= MAX_FUSED_BWD:
        _rms_norm_bwd_kernel[(programs,)](*args, BLOCK=block, num_warps=_num_warps(block))
    else:
        _rms_norm_bwd_looped_kernel[(programs,)](*args, BLOCK=LOOP_BLOCK, num_warps=_num_warps(LOOP_BLOCK))
    _column_sum_kernel[(triton.cdiv(n_cols, DW_BLOCK),)](dw_part, dw, programs, n_cols, BLOCK=DW_BLOCK,
                                                         num_warps=4)


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


def _rms_norm_fwd_impl(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    x2 = _rows(x)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    rstd = torch.empty(x2.shape[0], dtype=torch.float32, device=x.device)
    _launch_fwd(x2, weight.contiguous(), y, rstd, eps)
    return y.view(x.shape), rstd.view(x.shape[:-1])


def _rms_norm_bwd_impl(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor,
                       rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x2, dy2 = _rows(x), _rows(dy)
    dx = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    dw = torch.empty(weight.shape, dtype=weight.dtype, device=weight.device)
    _launch_bwd(x2, weight.contiguous(), dy2, rstd.reshape(-1), dx, dw)
    return dx.view(x.shape), dw


def _rms_norm_fwd_fake(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    return y, x.new_empty(x.shape[:-1], dtype=torch.float32)


def _rms_norm_bwd_fake(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor,
                       rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x, memory_format=torch.contiguous_format), weight.new_empty(weight.shape)


# (y, rstd): y = x * rstd * weight in x's dtype, rstd = 1/sqrt(mean(x^2, -1) + eps) in fp32
rms_norm_fwd = _register("rms_norm_fwd", _rms_norm_fwd_impl, _rms_norm_fwd_fake)
# (dx, dweight) from x, weight, the output gradient and the saved rstd
rms_norm_bwd = _register("rms_norm_bwd", _rms_norm_bwd_impl, _rms_norm_bwd_fake)


def _compiling() -> bool:
    # Eager calls skip the custom-op dispatcher (about 35 us of CPU per call, measured on the H200
    # host); torch.compile traces the registered ops.
    return torch.compiler.is_compiling()


# ------------------------------------------------------------------------------------- autograd


class _RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, rstd = rms_norm_fwd(x, weight, eps) if _compiling() else _rms_norm_fwd_impl(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        bwd = rms_norm_bwd if _compiling() else _rms_norm_bwd_impl
        dx, dw = bwd(x, weight, dy, rstd)
        return dx, dw, None


# ----------------------------------------------------------------------------------- public API


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension, differentiable in x and weight; output in x's dtype."""
    if weight.shape != x.shape[-1:]:
        raise ValueError(f"weight shape {tuple(weight.shape)} does not match the last dim of x {tuple(x.shape)}")
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _RMSNormFunction.apply(x, weight, eps)
    y, _ = rms_norm_fwd(x, weight, eps) if _compiling() else _rms_norm_fwd_impl(x, weight, eps)
    return y


class ModelNew(nn.Module):
    """Matches reference.py's Model: RMSNorm with a `weight` parameter."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        # initialised as the reference does (the verifier copies the reference's values in anyway)
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)
