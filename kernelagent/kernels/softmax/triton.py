"""Row softmax (last dimension) in Triton, forward and backward, registered as torch custom ops.

Three paths by row width N (padded to a power of two): short rows share a program (a [ROWS, N]
tile, so each program still moves a few KiB), medium rows get a program each and stay in
registers (one read, one write), and rows too wide for registers take two passes over column
blocks (online max/sum, then the write, walking back so the freshest blocks come from L2).
fp32 math, output in the input's dtype. A row stride is taken as it is; a strided last dimension
is copied first.

`torch.ops.kernelagent.softmax_fwd` has a backward (`softmax_bwd`), a fake implementation and a
CPU implementation in plain torch (fp32), so the public function works on any device, under
`torch.compile`, and on meta tensors. Under the Triton interpreter the CPU path runs the kernels.
Order: launch tables -> kernels -> launchers -> custom ops -> public API -> ModelNew.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import triton
import triton.language as tl

# ---------------------------------------------------------------------------------- launch tables
# (widest padded row, rows per program, num_warps), first match wins; wider rows loop over column
# blocks. Tuned on an H200 (`benchmarks/rowwise_peers.py --tune`, 2**27 bf16 elements a width;
# benchmarks/results/2026-12-03-h200/rowwise_tuning_softmax_forward.json): 1024 (4.05 TB/s against
# 3.40 with 8 rows a program), 8192 and 16384 (the entries were already the best); the other
# multi-row entries aim at 8-16 KiB of bf16 per program and are untuned.
FWD_TABLE = ((64, 64, 4), (256, 32, 4), (1024, 2, 4), (2048, 4, 8), (4096, 2, 8), (8192, 1, 16),
             (16384, 1, 16), (32768, 1, 16))
# The backward holds two rows (y and dy): registers run out at half the forward's width.
BWD_TABLE = ((64, 64, 4), (256, 32, 4), (1024, 8, 4), (2048, 4, 8), (4096, 2, 8), (8192, 1, 16),
             (16384, 1, 16))
LOOP_FWD = (8192, 16)  # (column block, num_warps) of the looped forward
LOOP_BWD = (8192, 16)


def pick(table: tuple[tuple[int, int, int], ...], n_cols: int) -> tuple[int, int, int] | None:
    """(BLOCK, ROWS, num_warps) for a row of n_cols from a launch table, or None: loop over columns."""
    block = triton.next_power_of_2(max(n_cols, 1))
    for widest, rows, warps in table:
        if block <= widest:
            return block, rows, warps
    return None


# ----------------------------------------------------------------------------------------- kernels


@triton.jit
def _softmax_fwd_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, ROWS: tl.constexpr,
                        BLOCK: tl.constexpr):
    # a [ROWS, BLOCK] tile: whole rows in registers, read once and written once
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    x = tl.load(x_ptr + rows * x_stride + cols, mask=mask, other=-float("inf"),
                eviction_policy="evict_first").to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])  # padding: exp(-inf) = 0
    y = e * (1.0 / tl.sum(e, axis=1))[:, None]
    tl.store(y_ptr + rows * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_fwd_looped_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    cols = tl.arange(0, BLOCK)
    # online softmax per lane: running max m and sum s of exp(x - m); lanes merge once at the end
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        live = m_new > -float("inf")  # a lane that saw only padding keeps s = 0 (no -inf - -inf)
        s = tl.where(live, s * tl.exp(m - m_new) + tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    n_blocks = tl.cdiv(n_cols, BLOCK)
    for i in range(0, n_blocks):
        start = (n_blocks - 1 - i) * BLOCK  # last block first: it is the one still in L2
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        tl.store(y_row + start + cols, (tl.exp(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd_kernel(y_ptr, dy_ptr, dx_ptr, n_rows, n_cols, y_stride, dy_stride, dx_stride,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # dx = y * (dy - sum(y * dy))
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    y = tl.load(y_ptr + rows * y_stride + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    dy = tl.load(dy_ptr + rows * dy_stride + cols, mask=mask, other=0.0,
                 eviction_policy="evict_first").to(tl.float32)
    dx = y * (dy - tl.sum(y * dy, axis=1)[:, None])
    tl.store(dx_ptr + rows * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


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
    n_blocks = tl.cdiv(n_cols, BLOCK)
    for i in range(0, n_blocks):
        start = (n_blocks - 1 - i) * BLOCK
        mask = start + cols < n_cols
        y = tl.load(y_row + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        dy = tl.load(dy_row + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        tl.store(dx_row + start + cols, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------------------- launchers

# Under TRITON_INTERPRET=1 @triton.jit gives interpreted functions: the kernels then run on CPU tensors.
INTERPRETING = not isinstance(_softmax_fwd_kernel, triton.runtime.JITFunction)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """A 2-D [rows, cols] view with unit column stride (copies only when the last dim is strided)."""
    t2 = t.reshape(-1, t.shape[-1] if t.dim() else 1)
    return t2 if t2.stride(-1) == 1 or t2.shape[-1] == 1 else t2.contiguous()


def launch_fwd(x: torch.Tensor, y: torch.Tensor) -> None:
    """y = softmax(x) for 2-D x and y with unit column stride."""
    n_rows, n_cols = x.shape
    cfg = pick(FWD_TABLE, n_cols)
    if cfg is not None:
        block, rows, warps = cfg
        _softmax_fwd_kernel[(triton.cdiv(n_rows, rows),)](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                                          ROWS=rows, BLOCK=block, num_warps=warps)
    else:
        block, warps = LOOP_FWD
        _softmax_fwd_looped_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=warps)


def launch_bwd(y: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor) -> None:
    """dx = y * (dy - sum(y * dy)) for 2-D tensors with unit column stride."""
    n_rows, n_cols = y.shape
    strides = (y.stride(0), dy.stride(0), dx.stride(0))
    cfg = pick(BWD_TABLE, n_cols)
    if cfg is not None:
        block, rows, warps = cfg
        _softmax_bwd_kernel[(triton.cdiv(n_rows, rows),)](y, dy, dx, n_rows, n_cols, *strides, ROWS=rows,
                                                          BLOCK=block, num_warps=warps)
    else:
        block, warps = LOOP_BWD
        _softmax_bwd_looped_kernel[(n_rows,)](y, dy, dx, n_cols, *strides, BLOCK=block, num_warps=warps)


def _check(x: torch.Tensor, cpu: bool = False) -> None:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16) + ((torch.float64,) if cpu else ()):
        raise TypeError(f"softmax: float32, float16 or bfloat16 input expected, got {x.dtype}")


def softmax_forward(x: torch.Tensor) -> torch.Tensor:
    """The Triton forward: softmax over the last dimension, contiguous output in x's dtype."""
    _check(x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        launch_fwd(_rows(x), y.view(-1, y.shape[-1] if y.dim() else 1))
    return y


def softmax_backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """The Triton backward from the saved output y and the output gradient dy."""
    dx = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    if y.numel():
        launch_bwd(_rows(y), _rows(dy.to(y.dtype)), dx.view(-1, dx.shape[-1] if dx.dim() else 1))
    return dx


# -------------------------------------------------------------------------------------- custom ops


def _up(t: torch.Tensor) -> torch.Tensor:
    """The CPU path's working precision: fp32, or fp64 for fp64 inputs."""
    return t.double() if t.dtype == torch.float64 else t.float()


def _on_triton(t: torch.Tensor) -> bool:
    return t.is_cuda or INTERPRETING


def _fwd_impl(x: torch.Tensor) -> torch.Tensor:
    if _on_triton(x):
        return softmax_forward(x)
    _check(x, cpu=True)
    return torch.softmax(_up(x), dim=-1).to(x.dtype).contiguous()  # CPU: the fp32 reference path


def _bwd_impl(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    if _on_triton(y):
        return softmax_backward(y, dy)
    yf = _up(y)
    dyf = _up(dy)
    return (yf * (dyf - (yf * dyf).sum(-1, keepdim=True))).to(y.dtype).contiguous()


def _fwd_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _bwd_fake(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(y, memory_format=torch.contiguous_format)


def _setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)


def _backward(ctx, dy: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    return torch.ops.kernelagent.softmax_bwd(y, dy)


def _register(name: str, impl, fake, backward=None, setup=None):
    """`impl` as the custom op `kernelagent::<name>` with a fake implementation and, given one, a
    backward. Registered once per process: another copy of this file (imported by path) reuses it."""
    if hasattr(torch.ops.kernelagent, name):
        return getattr(torch.ops.kernelagent, name)
    op = torch.library.custom_op(f"kernelagent::{name}", impl, mutates_args=())
    op.register_fake(fake)
    if backward is not None:
        op.register_autograd(backward, setup_context=setup)
    return op


# y = softmax(x, -1) in x's dtype; differentiable
softmax_fwd = _register("softmax_fwd", _fwd_impl, _fwd_fake, _backward, _setup)
# dx from the saved output y and the output gradient dy
softmax_bwd = _register("softmax_bwd", _bwd_impl, _bwd_fake)


# -------------------------------------------------------------------------------------- public API


def softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax over the last dimension, differentiable; fp32, fp16 or bf16 in, same dtype out.
    Any device (CPU: torch in fp32), fake and meta tensors, torch.compile."""
    return torch.ops.kernelagent.softmax_fwd(x)


class _SoftmaxFunction(torch.autograd.Function):
    """The kernels without the op dispatcher, for ModelNew (the verifier checks them directly)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = softmax_forward(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return softmax_backward(y, dy)


class ModelNew(nn.Module):
    """Matches reference.py's Model: softmax(x, dim=-1)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _SoftmaxFunction.apply(x)
