"""RMSNorm (last dimension, optional weight, optional fused residual add) in Triton, forward and
backward, registered as torch custom ops.

Forward: y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps) kept in fp32 for the backward; with
a residual, s = x + residual is written too (rounded to x's dtype, then normalised, as the unfused
code does). Short rows share a program ([ROWS, N] tiles); rows up to 4096 stay in registers;
wider rows take two passes over column blocks (the second re-reads the row from L2, as torch.compile's
kernel does: faster from 8192 columns on an H200). Backward: a fixed grid of programs walks the row
tiles, writes dx = rstd * (w*dy - xhat * mean(w*dy*xhat)) (+ the sum's own gradient) while keeping
its share of dw = sum(dy * xhat) in fp32, and a second kernel sums the shares column-wise in a
fixed order (deterministic, no atomics). Rows too wide for registers (16384 and up by default) are
split: one kernel sums w*dy*xhat over column segments of each row, a second walks [rows, column
block] tiles (dw kept in registers, one share per row group), then the shares are summed. A row
stride is taken as it is.
Order: launch tables -> kernels -> launchers -> custom ops -> public API -> ModelNew.
"""

from __future__ import annotations

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

# ---------------------------------------------------------------------------------- launch tables
# Forward (widest padded row, rows per program, num_warps): rows up to 4096 in registers; wider rows
# take the looped two-pass kernel (sum of squares, then the row again from L2, last block first), as
# torch.compile's generated kernel does: at 8192 and 16384 columns 6 % and 5 % faster than the row in
# registers (16 warps), 4.08 and 4.03 TB/s against torch.compile's 4.17 and 4.00 in the same run
# (`rowwise_peers.py --tune`, benchmarks/results/2026-12-02-h200/rowwise_tuning_loop.json). 1024 and 4096
# from the same tune (rowwise_tuning.json: 4 % and 3 % faster than (1024, 8, 4) and (4096, 2, 8) before);
# 64 to 2048 untuned; LOOP_FWD's 16 warps untuned past 16384 (8 before).
FWD_TABLE = ((64, 64, 4), (256, 32, 4), (1024, 2, 4), (2048, 4, 8), (4096, 4, 16))
LOOP_FWD = (4096, 16)  # (column block, num_warps)
# Backward (widest padded row, rows per tile, num_warps, programs per SM). A program holds the tile
# of x and dy twice (the next tile is loaded while this one is reduced): about 64 fp32 values a
# thread at most; 8192 with 16 warps and one program per SM measured best of 1/2/4 on an H200.
# 16384 does not fit: ptxas for sm_90 spills 248 (32 warps) or 536 (16 warps) bytes a thread.
# 1024 and 2048 from `rowwise_peers.py --tune --tune-mode backward` (rowwise_tuning_backward.json, 2**27
# bf16 elements): 3.87 / 3.88 TB/s against 3.15 / 3.21 for (1024, 2, 8, 4) / (2048, 1, 8, 2) before and
# torch.compile's 3.58 / 3.32 in the same run; 512 from rowwise_tuning_backward_confirm.json (3.84 TB/s against
# 3.10 for (512, 4, 8, 4) and torch.compile's 3.54).
BWD_TABLE = ((64, 16, 4, 4), (128, 8, 4, 4), (256, 4, 4, 4), (512, 4, 4, 4), (1024, 2, 4, 4),
             (2048, 2, 8, 2), (4096, 1, 8, 2), (8192, 1, 16, 1))
LOOP_BWD = (4096, 8, 1)  # (column block, num_warps, programs per SM)
# Rows past BWD_TABLE from this padded width up take the split backward instead of LOOP_BWD: the
# looped kernel re-reads its row from L2 and read-modify-writes its fp32 dw share (n_cols floats a
# program) for every row; at 65536 the shares alone are 34 MB of the 60 MB L2 (0.90 TB/s measured;
# 1.37 at 16384). (narrowest padded width, column block, rows per tile, num_warps, programs per SM);
# untimed: 2048 x 1 rows with 8 warps takes 117 registers (ptxas, sm_90), so two programs fit an SM.
SPLIT_BWD = (16384, 2048, 1, 8, 2)
DOT_BWD = (2048, 8)  # the split's row-dot kernel: (column block, num_warps); a segment is >= 1 block
MAX_SEGMENTS = 64  # row segments summed by the split's dx kernel (segments widen past 64 blocks)
DW_BLOCK = 256  # columns per program at most when summing the dw shares (4096 // DW_BLOCK shares a step)
INTERPRETER_PROGRAMS = 3  # backward programs under the interpreter: several, so the tile loop runs


def pick(table: tuple[tuple[int, ...], ...], n_cols: int) -> tuple[int, ...] | None:
    """(BLOCK, *entry[1:]) for a row of n_cols from a launch table, or None: loop over columns."""
    block = triton.next_power_of_2(max(n_cols, 1))
    for entry in table:
        if block <= entry[0]:
            return (block, *entry[1:])
    return None


# ----------------------------------------------------------------------------------------- kernels


@triton.jit
def _rms_fwd_kernel(x_ptr, r_ptr, w_ptr, y_ptr, s_ptr, rstd_ptr, n_rows, n_cols, x_stride, r_stride,
                    y_stride, s_stride, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr, HAS_RES: tl.constexpr,
                    HAS_W: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    x = tl.load(x_ptr + rows * x_stride + cols, mask=mask, other=0.0, eviction_policy="evict_first")
    if HAS_RES:
        r = tl.load(r_ptr + rows * r_stride + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        x = (x.to(tl.float32) + r.to(tl.float32)).to(s_ptr.dtype.element_ty)  # rounded as torch's x + r
        tl.store(s_ptr + rows * s_stride + cols, x, mask=mask)
    xf = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(xf * xf, axis=1) / n_cols + eps)
    tl.store(rstd_ptr + rows, rstd[:, None], mask=rows < n_rows)
    y = xf * rstd[:, None]
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(y_ptr + rows * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_fwd_looped_kernel(x_ptr, r_ptr, w_ptr, y_ptr, s_ptr, rstd_ptr, n_cols, x_stride, r_stride, y_stride,
                           s_stride, eps, BLOCK: tl.constexpr, HAS_RES: tl.constexpr, HAS_W: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    # with a residual the second pass reads the sum it wrote (still in L2) instead of x and r; the
    # same lane stores and loads each element (same offsets, same layout), so no barrier is needed
    src_ptr = s_ptr + row * s_stride if HAS_RES else x_ptr + row * x_stride
    sq = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        # kept in L2 for the second pass, which re-reads x (with a residual it reads the sum s instead)
        x = tl.load(x_ptr + row * x_stride + start + cols, mask=mask, other=0.0,
                    eviction_policy="" if HAS_RES else "evict_last")
        if HAS_RES:
            r = tl.load(r_ptr + row * r_stride + start + cols, mask=mask, other=0.0)
            x = (x.to(tl.float32) + r.to(tl.float32)).to(s_ptr.dtype.element_ty)
            tl.store(src_ptr + start + cols, x, mask=mask)
        xf = x.to(tl.float32)
        sq += xf * xf
    rstd = tl.rsqrt(tl.sum(sq, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    n_blocks = tl.cdiv(n_cols, BLOCK)
    for i in range(0, n_blocks):
        start = (n_blocks - 1 - i) * BLOCK  # last block first: it is the one still in L2
        mask = start + cols < n_cols
        y = tl.load(src_ptr + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        y = y * rstd
        if HAS_W:
            y = y * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_bwd_kernel(x_ptr, w_ptr, dy_ptr, dres_ptr, rstd_ptr, dx_ptr, dw_part_ptr, n_rows, n_cols, x_stride,
                    dy_stride, dres_stride, dx_stride, ROWS: tl.constexpr, BLOCK: tl.constexpr,
                    HAS_W: tl.constexpr, HAS_DRES: tl.constexpr):
    # xhat = x * rstd;  dx = rstd * (w*dy - xhat * mean(w*dy*xhat)) (+ dres);  dw = sum_rows(dy * xhat)
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)[None, :]
    cmask = cols < n_cols
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    dw = tl.zeros([ROWS, BLOCK], tl.float32)
    n_tiles = tl.cdiv(n_rows, ROWS)
    rows = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]  # int64: row * stride may pass 2**31
    mask = (rows < n_rows) & cmask
    x = tl.load(x_ptr + rows * x_stride + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + rows * dy_stride + cols, mask=mask, other=0.0)
    rstd = tl.load(rstd_ptr + rows, mask=rows < n_rows, other=0.0)
    for _tile in range(pid, n_tiles, programs):
        # load the next tile (and its rstd) while this one is reduced (the loop is latency-bound otherwise)
        next_rows = rows + programs.to(tl.int64) * ROWS
        next_mask = (next_rows < n_rows) & cmask
        x_next = tl.load(x_ptr + next_rows * x_stride + cols, mask=next_mask, other=0.0)
        dy_next = tl.load(dy_ptr + next_rows * dy_stride + cols, mask=next_mask, other=0.0)
        rstd_next = tl.load(rstd_ptr + next_rows, mask=next_rows < n_rows, other=0.0)
        xhat = x.to(tl.float32) * rstd
        dyf = dy.to(tl.float32)
        wdy = dyf * w if HAS_W else dyf
        c = tl.sum(wdy * xhat, axis=1)[:, None] / n_cols
        dx = (wdy - xhat * c) * rstd
        if HAS_DRES:
            dx += tl.load(dres_ptr + rows * dres_stride + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(dx_ptr + rows * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if HAS_W:
            dw += dyf * xhat
        rows = next_rows
        mask = next_mask
        x = x_next
        dy = dy_next
        rstd = rstd_next
    if HAS_W:
        tl.store(dw_part_ptr + pid.to(tl.int64) * n_cols + cols, tl.sum(dw, axis=0)[None, :], mask=cmask)


@triton.jit
def _rms_bwd_looped_kernel(x_ptr, w_ptr, dy_ptr, dres_ptr, rstd_ptr, dx_ptr, dw_part_ptr, n_rows, n_cols,
                           x_stride, dy_stride, dres_stride, dx_stride, BLOCK: tl.constexpr, HAS_W: tl.constexpr,
                           HAS_DRES: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    dw_row = dw_part_ptr + pid.to(tl.int64) * n_cols  # this program's own share: no other writer
    if HAS_W:
        for start in range(0, n_cols, BLOCK):
            tl.store(dw_row + start + cols, tl.zeros([BLOCK], tl.float32), mask=start + cols < n_cols)
    n_blocks = tl.cdiv(n_cols, BLOCK)
    for row32 in range(pid, n_rows, programs):
        row = row32 + tl.zeros([], tl.int64)  # int64 (row * stride may pass 2**31), also in the interpreter
        rstd = tl.load(rstd_ptr + row)
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            x = tl.load(x_ptr + row * x_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            wdy = tl.load(dy_ptr + row * dy_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            if HAS_W:
                wdy = wdy * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            acc += wdy * x
        c = tl.sum(acc, axis=0) * rstd / n_cols
        for i in range(0, n_blocks):
            start = (n_blocks - 1 - i) * BLOCK  # last block first: it is the one still in L2
            mask = start + cols < n_cols
            xhat = tl.load(x_ptr + row * x_stride + start + cols, mask=mask, other=0.0).to(tl.float32) * rstd
            dyf = tl.load(dy_ptr + row * dy_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            wdy = dyf
            if HAS_W:
                wdy = dyf * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            dx = (wdy - xhat * c) * rstd
            if HAS_DRES:
                dx += tl.load(dres_ptr + row * dres_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(dx_ptr + row * dx_stride + start + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            if HAS_W:
                dw = tl.load(dw_row + start + cols, mask=mask, other=0.0)
                tl.store(dw_row + start + cols, dw + dyf * xhat, mask=mask)


@triton.jit
def _rms_bwd_dot_kernel(x_ptr, w_ptr, dy_ptr, rstd_ptr, dot_ptr, n_cols, n_segs, seg_cols, x_stride, dy_stride,
                        BLOCK: tl.constexpr, HAS_W: tl.constexpr):
    # dot[row, seg] = sum(w*dy*xhat) over the row's columns [seg * seg_cols, (seg + 1) * seg_cols)
    row = tl.program_id(0).to(tl.int64)
    seg = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(seg * seg_cols, tl.minimum(seg * seg_cols + seg_cols, n_cols), BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + row * x_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
        wdy = tl.load(dy_ptr + row * dy_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_W:
            wdy = wdy * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        acc += wdy * x
    tl.store(dot_ptr + row * n_segs + seg, tl.sum(acc, axis=0) * tl.load(rstd_ptr + row))


@triton.jit
def _rms_bwd_split_kernel(x_ptr, w_ptr, dy_ptr, dres_ptr, rstd_ptr, dot_ptr, dx_ptr, dw_part_ptr, n_rows, n_cols,
                          n_segs, group_rows, x_stride, dy_stride, dres_stride, dx_stride, ROWS: tl.constexpr,
                          BLOCK: tl.constexpr, SEGS: tl.constexpr, HAS_W: tl.constexpr, HAS_DRES: tl.constexpr):
    # program (column block, row group): dx of its [group_rows, BLOCK] strip, ROWS rows a step, with
    # c = mean(w*dy*xhat) from the row's segment dots; its share of dw stays in registers
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[None, :]
    cmask = cols < n_cols
    segs = tl.arange(0, SEGS)[None, :]
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    dw = tl.zeros([ROWS, BLOCK], tl.float32)
    group = tl.program_id(1)
    first = group.to(tl.int64) * group_rows  # int64: row * stride may pass 2**31
    end = tl.minimum(first + group_rows, n_rows)
    rows = first + tl.arange(0, ROWS)[:, None]
    mask = (rows < end) & cmask
    x = tl.load(x_ptr + rows * x_stride + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + rows * dy_stride + cols, mask=mask, other=0.0)
    dots = tl.load(dot_ptr + rows * n_segs + segs, mask=(rows < end) & (segs < n_segs), other=0.0)
    rstd = tl.load(rstd_ptr + rows, mask=rows < end, other=0.0)
    for _step in range(0, tl.cdiv(group_rows, ROWS)):
        # load the next tile while this one is reduced
        next_rows = rows + ROWS
        next_mask = (next_rows < end) & cmask
        x_next = tl.load(x_ptr + next_rows * x_stride + cols, mask=next_mask, other=0.0)
        dy_next = tl.load(dy_ptr + next_rows * dy_stride + cols, mask=next_mask, other=0.0)
        dots_next = tl.load(dot_ptr + next_rows * n_segs + segs, mask=(next_rows < end) & (segs < n_segs), other=0.0)
        rstd_next = tl.load(rstd_ptr + next_rows, mask=next_rows < end, other=0.0)
        xhat = x.to(tl.float32) * rstd
        dyf = dy.to(tl.float32)
        wdy = dyf * w if HAS_W else dyf
        c = tl.sum(dots, axis=1)[:, None] / n_cols
        dx = (wdy - xhat * c) * rstd
        if HAS_DRES:
            dx += tl.load(dres_ptr + rows * dres_stride + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(dx_ptr + rows * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if HAS_W:
            dw += dyf * xhat
        rows = next_rows
        mask = next_mask
        x = x_next
        dy = dy_next
        dots = dots_next
        rstd = rstd_next
    if HAS_W:
        tl.store(dw_part_ptr + group.to(tl.int64) * n_cols + cols, tl.sum(dw, axis=0)[None, :], mask=cmask)


@triton.jit
def _column_sum_kernel(part_ptr, out_ptr, n_parts, n_cols, BLOCK: tl.constexpr):
    # out[c] = sum_p part[p, c]: [PARTS, BLOCK] tiles (PARTS loads in flight a step), slot i summing
    # parts i, i + PARTS, ... in order, then the slots in a fixed tree (the same bits on every run)
    PARTS: tl.constexpr = 4096 // BLOCK
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[None, :]
    parts = tl.arange(0, PARTS)[:, None]
    cmask = cols < n_cols
    acc = tl.zeros([PARTS, BLOCK], tl.float32)
    for p in range(0, n_parts, PARTS):
        acc += tl.load(part_ptr + (p + parts).to(tl.int64) * n_cols + cols, mask=cmask & (p + parts < n_parts),
                       other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0)[None, :].to(out_ptr.dtype.element_ty), mask=cmask)


# --------------------------------------------------------------------------------------- launchers

# Under TRITON_INTERPRET=1 @triton.jit gives interpreted functions: the kernels then run on CPU tensors.
INTERPRETING = not isinstance(_rms_fwd_kernel, triton.runtime.JITFunction)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """A 2-D [rows, cols] view with unit column stride (copies only when the last dim is strided)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 or t2.shape[-1] == 1 else t2.contiguous()


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _programs(t: torch.Tensor, per_sm: int, n_tiles: int) -> int:
    target = per_sm * _sm_count(t.device.index or 0) if t.is_cuda else INTERPRETER_PROGRAMS
    return max(1, min(n_tiles, target))


def launch_fwd(x, residual, w, y, s, rstd, eps: float) -> None:
    """y (and s = x + residual) and rstd for 2-D x; residual, w and s may be None."""
    n_rows, n_cols = x.shape
    has_res, has_w = residual is not None, w is not None
    r, s_out = (residual, s) if has_res else (x, y)  # placeholders the kernel never touches
    args = (x, r, w if has_w else x, y, s_out, rstd, n_rows, n_cols, x.stride(0), r.stride(0), y.stride(0),
            s_out.stride(0), eps)
    cfg = pick(FWD_TABLE, n_cols)
    if cfg is not None:
        block, rows, warps = cfg
        _rms_fwd_kernel[(triton.cdiv(n_rows, rows),)](*args, ROWS=rows, BLOCK=block, HAS_RES=has_res, HAS_W=has_w,
                                                      num_warps=warps)
    else:
        block, warps = LOOP_FWD
        _rms_fwd_looped_kernel[(n_rows,)](*args[:6], *args[7:], BLOCK=block, HAS_RES=has_res, HAS_W=has_w,
                                          num_warps=warps)


def column_sum(part: torch.Tensor, out: torch.Tensor) -> None:
    """out = part.sum(0) in a fixed order: columns split so that narrow rows still get many programs."""
    n_parts, n_cols = part.shape
    block = max(16, min(DW_BLOCK, triton.next_power_of_2(triton.cdiv(n_cols, 64))))
    _column_sum_kernel[(triton.cdiv(n_cols, block),)](part, out, n_parts, n_cols, BLOCK=block, num_warps=4)


def split_segments(n_cols: int) -> tuple[int, int]:
    """(columns a segment, segments) of the split backward's row dots: whole DOT_BWD blocks, at most
    MAX_SEGMENTS of them."""
    seg = DOT_BWD[0] * triton.cdiv(triton.cdiv(n_cols, DOT_BWD[0]), MAX_SEGMENTS)
    return seg, triton.cdiv(n_cols, seg)


def launch_bwd_split(x, w, dy, dres, rstd, dx, dw) -> None:
    """launch_bwd for rows too wide for registers: row dots by segments, then [rows, block] tiles."""
    n_rows, n_cols = x.shape
    has_w, has_dres = w is not None, dres is not None
    _, block, rows, warps, per_sm = SPLIT_BWD
    block = min(block, triton.next_power_of_2(n_cols))
    seg, n_segs = split_segments(n_cols)
    dots = torch.empty((n_rows, n_segs), dtype=torch.float32, device=x.device)
    w_t = w if has_w else x
    _rms_bwd_dot_kernel[(n_rows, n_segs)](x, w_t, dy, rstd, dots, n_cols, n_segs, seg, x.stride(0), dy.stride(0),
                                          BLOCK=min(DOT_BWD[0], triton.next_power_of_2(n_cols)), HAS_W=has_w,
                                          num_warps=DOT_BWD[1])
    col_blocks = triton.cdiv(n_cols, block)
    groups = _programs(x, per_sm, triton.cdiv(n_rows, rows) * col_blocks)
    groups = max(1, min(triton.cdiv(n_rows, rows), triton.cdiv(groups, col_blocks)))
    group_rows = triton.cdiv(n_rows, groups)
    groups = triton.cdiv(n_rows, group_rows)  # no empty group
    dw_part = torch.empty((groups, n_cols) if has_w else (1,), dtype=torch.float32, device=x.device)
    dres_t = dres if has_dres else dy
    _rms_bwd_split_kernel[(col_blocks, groups)](x, w_t, dy, dres_t, rstd, dots, dx, dw_part, n_rows, n_cols, n_segs,
                                                group_rows, x.stride(0), dy.stride(0), dres_t.stride(0), dx.stride(0),
                                                ROWS=rows, BLOCK=block, SEGS=triton.next_power_of_2(n_segs),
                                                HAS_W=has_w, HAS_DRES=has_dres, num_warps=warps)
    if has_w:
        column_sum(dw_part, dw)


def launch_bwd(x, w, dy, dres, rstd, dx, dw) -> None:
    """dx (plus dres when given) and dw (when w is given) for 2-D x and dy; rstd [rows] fp32."""
    n_rows, n_cols = x.shape
    has_w, has_dres = w is not None, dres is not None
    cfg = pick(BWD_TABLE, n_cols)
    if cfg is None and triton.next_power_of_2(n_cols) >= SPLIT_BWD[0]:
        launch_bwd_split(x, w, dy, dres, rstd, dx, dw)
        return
    block, rows, warps, per_sm = cfg if cfg is not None else (LOOP_BWD[0], 1, *LOOP_BWD[1:])
    programs = _programs(x, per_sm, triton.cdiv(n_rows, rows))
    dw_part = torch.empty((programs, n_cols) if has_w else (1,), dtype=torch.float32, device=x.device)
    dres_t = dres if has_dres else dy
    args = (x, w if has_w else x, dy, dres_t, rstd, dx, dw_part, n_rows, n_cols, x.stride(0), dy.stride(0),
            dres_t.stride(0), dx.stride(0))
    if cfg is not None:
        _rms_bwd_kernel[(programs,)](*args, ROWS=rows, BLOCK=block, HAS_W=has_w, HAS_DRES=has_dres, num_warps=warps)
    else:
        _rms_bwd_looped_kernel[(programs,)](*args, BLOCK=block, HAS_W=has_w, HAS_DRES=has_dres, num_warps=warps)
    if has_w:
        column_sum(dw_part, dw)


def _check(x: torch.Tensor, weight: torch.Tensor | None, residual: torch.Tensor | None = None,
           cpu: bool = False) -> None:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16) + ((torch.float64,) if cpu else ()):
        raise TypeError(f"rms_norm: float32, float16 or bfloat16 input expected, got {x.dtype}")
    if x.dim() == 0:
        raise ValueError("rms_norm: the input needs at least one dimension")
    if weight is not None and weight.shape != x.shape[-1:]:
        raise ValueError(f"rms_norm: weight shape {tuple(weight.shape)} does not match the last dim of x "
                         f"{tuple(x.shape)}")
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"rms_norm: residual shape {tuple(residual.shape)} differs from x {tuple(x.shape)}")


def rms_norm_forward(x: torch.Tensor, weight: torch.Tensor | None, eps: float,
                     residual: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The Triton forward: (y, rstd, s) with s = x + residual (None without a residual)."""
    _check(x, weight, residual)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    s = torch.empty(x.shape, dtype=x.dtype, device=x.device) if residual is not None else None
    rstd = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    if x.numel():
        n = x.shape[-1]
        launch_fwd(_rows(x), None if residual is None else _rows(residual),
                   None if weight is None else weight.contiguous(), y.view(-1, n), None if s is None else s.view(-1, n),
                   rstd.view(-1), eps)
    return y, rstd, s


def rms_norm_backward(x: torch.Tensor, weight: torch.Tensor | None, dy: torch.Tensor, rstd: torch.Tensor,
                      dres: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The Triton backward: (dx + dres, dweight) from the normalised input x (or the sum s) and rstd."""
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    dw = None if weight is None else torch.empty(weight.shape, dtype=weight.dtype, device=weight.device)
    if x.numel():
        n = x.shape[-1]
        launch_bwd(_rows(x), None if weight is None else weight.contiguous(), _rows(dy.to(x.dtype)),
                   None if dres is None else _rows(dres.to(x.dtype)), rstd.reshape(-1), dx.view(-1, n), dw)
    elif dw is not None:
        dw.zero_()
    return dx, dw


# -------------------------------------------------------------------------------------- custom ops
# CPU without the interpreter: plain torch in fp32 (the reference path); CUDA: the kernels above.


def _up(t: torch.Tensor) -> torch.Tensor:
    """The CPU path's working precision: fp32, or fp64 for fp64 inputs."""
    return t.double() if t.dtype == torch.float64 else t.float()


def _stat_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _on_triton(t: torch.Tensor) -> bool:
    return t.is_cuda or INTERPRETING


def _torch_fwd(x, weight, eps):
    xf = _up(x)
    rstd = torch.rsqrt(xf.pow(2).mean(-1) + eps)
    y = xf * rstd[..., None]
    if weight is not None:
        y = y * _up(weight)
    return y.to(x.dtype).contiguous(), rstd


def _torch_bwd(x, weight, dy, rstd, dres):
    xhat = _up(x) * rstd[..., None]
    dyf = _up(dy)
    wdy = dyf * _up(weight) if weight is not None else dyf
    dx = (wdy - xhat * (wdy * xhat).mean(-1, keepdim=True)) * rstd[..., None]
    if dres is not None:
        dx = dx + _up(dres)
    dw = (dyf * xhat).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype) if weight is not None else None
    return dx.to(x.dtype).contiguous(), dw


def _no_dw(x: torch.Tensor, dw: torch.Tensor | None) -> torch.Tensor:
    return dw if dw is not None else x.new_empty(0)  # an op cannot return None: an empty tensor stands for it


def _fwd_impl(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    if _on_triton(x):
        y, rstd, _ = rms_norm_forward(x, weight, eps)
        return y, rstd
    _check(x, weight, cpu=True)
    return _torch_fwd(x, weight, eps)


def _bwd_impl(x: torch.Tensor, weight: torch.Tensor | None, dy: torch.Tensor,
              rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dw = rms_norm_backward(x, weight, dy, rstd) if _on_triton(x) else _torch_bwd(x, weight, dy, rstd, None)
    return dx, _no_dw(x, dw)


def _add_fwd_impl(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
                  eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if _on_triton(x):
        y, rstd, s = rms_norm_forward(x, weight, eps, residual)
        return y, s, rstd
    _check(x, weight, residual, cpu=True)
    s = (x + residual.to(x.dtype)).contiguous()
    y, rstd = _torch_fwd(s, weight, eps)
    return y, s, rstd


def _add_bwd_impl(s: torch.Tensor, weight: torch.Tensor | None, dy: torch.Tensor, ds: torch.Tensor,
                  rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dw = rms_norm_backward(s, weight, dy, rstd, ds) if _on_triton(s) else _torch_bwd(s, weight, dy, rstd, ds)
    return dx, _no_dw(s, dw)


def _fwd_fake(x, weight, eps):
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(x.shape[:-1], dtype=_stat_dtype(x))


def _bwd_fake(x, weight, dy, rstd):
    dw = weight.new_empty(weight.shape) if weight is not None else x.new_empty(0)
    return torch.empty_like(x, memory_format=torch.contiguous_format), dw


def _add_fwd_fake(x, residual, weight, eps):
    y, rstd = _fwd_fake(x, weight, eps)
    return y, torch.empty_like(x, memory_format=torch.contiguous_format), rstd


def _add_bwd_fake(s, weight, dy, ds, rstd):
    return _bwd_fake(s, weight, dy, rstd)


def _setup(ctx, inputs, output) -> None:
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])


def _backward(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dw = torch.ops.kernelagent.rms_norm_bwd(x, weight, dy, rstd)
    return dx, (dw if weight is not None else None), None


def _add_setup(ctx, inputs, output) -> None:
    _, residual, weight, _ = inputs
    ctx.residual_dtype = residual.dtype
    ctx.save_for_backward(output[1], weight, output[2])


def _add_backward(ctx, dy, ds, _drstd):
    s, weight, rstd = ctx.saved_tensors
    if ds is None:  # the sum output was not used
        dx, dw = torch.ops.kernelagent.rms_norm_bwd(s, weight, dy, rstd)
    else:
        dx, dw = torch.ops.kernelagent.rms_norm_add_bwd(s, weight, dy, ds, rstd)
    return dx, dx.to(ctx.residual_dtype), (dw if weight is not None else None), None


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


# (y, rstd): y = x * rstd * weight in x's dtype, rstd = 1/sqrt(mean(x^2, -1) + eps) in fp32; differentiable
rms_norm_fwd = _register("rms_norm_fwd", _fwd_impl, _fwd_fake, _backward, _setup)
# (dx, dweight) from x, weight, the output gradient and the saved rstd (dweight empty without a weight)
rms_norm_bwd = _register("rms_norm_bwd", _bwd_impl, _bwd_fake)
# (y, s, rstd) with s = x + residual and y = rms_norm(s); differentiable in x, residual and weight
rms_norm_add_fwd = _register("rms_norm_add_fwd", _add_fwd_impl, _add_fwd_fake, _add_backward, _add_setup)
# (ds, dweight): ds = d(y)/ds + the sum's own gradient, the gradient of both x and residual
rms_norm_add_bwd = _register("rms_norm_add_bwd", _add_bwd_impl, _add_bwd_fake)


# -------------------------------------------------------------------------------------- public API


def _default_eps(x: torch.Tensor, eps: float | None) -> float:
    """torch's default for eps=None: the machine epsilon of the type it computes in (fp32 for half types)."""
    if eps is not None:
        return float(eps)
    return float(torch.finfo(torch.float64 if x.dtype == torch.float64 else torch.float32).eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None) -> torch.Tensor:
    """RMSNorm over the last dimension (F.rms_norm(x, x.shape[-1:], weight, eps)), differentiable in x
    and weight; output in x's dtype. Any device, fake and meta tensors, torch.compile."""
    y, _ = torch.ops.kernelagent.rms_norm_fwd(x, weight, _default_eps(x, eps))
    return y


def rms_norm_add(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None,
                 eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + residual, weight, eps), x + residual) in one pass, differentiable in all three."""
    y, s, _ = torch.ops.kernelagent.rms_norm_add_fwd(x, residual, weight, _default_eps(x, eps))
    return y, s


class _RMSNormFunction(torch.autograd.Function):
    """The kernels without the op dispatcher, for ModelNew (the verifier checks them directly)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, rstd, _ = rms_norm_forward(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        dx, dw = rms_norm_backward(x, weight, dy, rstd)
        return dx, dw, None


class ModelNew(nn.Module):
    """Matches reference.py's Model: RMSNorm with a `weight` parameter."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        # initialised as the reference does (the verifier copies the reference's values in anyway)
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RMSNormFunction.apply(x, self.weight, self.eps)
