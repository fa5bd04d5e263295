"""LayerNorm (last dimension, optional weight and bias) in Triton, forward and backward, registered as
torch custom ops.

Forward: y = (x - mean) * rstd * w + b, with mean and rstd = 1/sqrt(var + eps) kept in fp32 for the
backward. Short rows share a program ([ROWS, N] tiles); rows up to 16384 stay in registers (mean,
then the variance of the centred row: two reductions, one read); wider rows take two passes over
column blocks, the first merging per-lane Welford statistics (no sum-of-squares cancellation).
Backward: a fixed grid of programs walks the row tiles, writes
dx = rstd * (w*dy - mean(w*dy) - xhat * mean(w*dy*xhat)) while keeping its shares of
dw = sum(dy * xhat) and db = sum(dy) in fp32; a second kernel sums the shares column-wise in a fixed
order (deterministic, no atomics). Rows too wide for registers (16384 and up by default) are split:
one kernel sums w*dy*xhat and w*dy over column segments of each row, a second walks [rows, column
block] tiles (dw and db kept in registers, one share per row group). A row stride is taken as it is.
Order: launch tables -> kernels -> launchers -> custom ops -> public API -> ModelNew.
"""

from __future__ import annotations

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

# ---------------------------------------------------------------------------------- launch tables
# Forward: 1024, 4096 and 8192 from `rowwise_peers.py --tune` (benchmarks/results/2026-12-02-h200/
# rowwise_tuning.json: 4 %, 3 % and 7 % faster than rms_norm's entries, used here before); 16384 within
# 0.3 % of the best there; the rest as rms_norm's, untuned for LayerNorm.
FWD_TABLE = ((64, 64, 4), (256, 32, 4), (1024, 2, 4), (2048, 4, 8), (4096, 2, 16), (8192, 1, 4),
             (16384, 1, 16))
LOOP_FWD = (4096, 8)  # (column block, num_warps)
# (widest padded row, rows per tile, num_warps, programs per SM); the tile of x and dy is held twice.
# ptxas for sm_90: 4096 with 8 warps takes 245 registers (one program an SM, not two), 8192 with 16
# spills 88 bytes a thread, 16384 spills 360+; `rowwise_peers.py --tune` times the alternatives.
# 1024 and 2048 from its backward tune (rowwise_tuning_backward.json, 2**27 bf16 elements): 3.66 / 3.59
# TB/s against 2.89 / 2.98 for (1024, 2, 8, 4) / (2048, 1, 8, 2) before and torch.compile's 3.06 / 2.91;
# 512 from the eighth session's (rowwise_tuning_layernorm_512.json): 3.02 TB/s against 2.80 for (512, 4, 8,
# 4) and torch.compile's 3.26 (still behind); 8192's entry was the best there.
BWD_TABLE = ((64, 16, 4, 4), (128, 8, 4, 4), (256, 4, 4, 4), (512, 2, 4, 4), (1024, 2, 4, 4),
             (2048, 1, 4, 4), (4096, 1, 8, 2), (8192, 1, 16, 1))
LOOP_BWD = (4096, 8, 1)  # (column block, num_warps, programs per SM)
# Rows past BWD_TABLE from this padded width up take the split backward instead of LOOP_BWD (whose
# per-row read-modify-write of two fp32 shares of n_cols floats a program overflows L2 on wide rows):
# (narrowest padded width, column block, rows per tile, num_warps, programs per SM); untimed: 117
# registers (ptxas, sm_90), two programs an SM. Measured before: 0.96 TB/s at 16384 through LOOP_BWD.
SPLIT_BWD = (16384, 2048, 1, 8, 2)
DOT_BWD = (2048, 8)  # the split's row-dot kernel: (column block, num_warps); a segment is >= 1 block
MAX_SEGMENTS = 64  # row segments summed by the split's dx kernel (segments widen past 64 blocks)
DW_BLOCK = 256  # columns per program at most when summing the shares (4096 // DW_BLOCK shares a step)
INTERPRETER_PROGRAMS = 3  # backward programs under the interpreter: several, so the tile loop runs
# The backward is compiled without mul + add -> FMA contraction: in w*dy - mean(w*dy) an FMA keeps the
# product unrounded on one side only, so a row of one column (dx exactly 0) got its rounding error x rstd.
BWD_OPTIONS = {"enable_fp_fusion": False}
# The backward's rows in registers (_ln_bwd_kernel): both row means from one reduction (3 barriers a
# tile), no select on xhat (dy is 0 in padded columns), mul + add contracted to FMA from two columns on
# (FMA_OPTIONS), dweight and dbias summed by one launch; its tile loop pipelined through shared memory,
# BWD_STAGES deep (cp.async into STAGES - 1 buffers of a tile of x and dy: 32 KB each at 8192 bf16
# columns). On the H200 at [32768, 8192] bf16 (benchmarks/results/2026-12-03-h200/ln_bwd.json): 4.01 TB/s
# with 3 stages, 3.97 / 3.95 with 4 / 5, 3.69 with the next tile prefetched into registers instead, 3.60
# for the kernel before (two reductions, no contraction). ptxas for sm_90: 128 registers, no spills.
BWD_STAGES = 3
STAGE_SMEM = 192 * 1024  # shared memory an SM for those buffers at most (fewer stages past it)
# One column is launched with BWD_OPTIONS: there the row sum of w*dy is the product itself, which
# contraction would re-fuse unrounded into dx. From two on the row means are quotients, and dx is
# (w*dy - xhat*c1) - c2: where xhat is 0 (one column) the first difference is w*dy rounded either way.
FMA_OPTIONS: dict = {}


def pick(table: tuple[tuple[int, ...], ...], n_cols: int) -> tuple[int, ...] | None:
    """(BLOCK, *entry[1:]) for a row of n_cols from a launch table, or None: loop over columns."""
    block = triton.next_power_of_2(max(n_cols, 1))
    for entry in table:
        if block <= entry[0]:
            return (block, *entry[1:])
    return None


# ----------------------------------------------------------------------------------------- kernels


@triton.jit
def _ln_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                   ROWS: tl.constexpr, BLOCK: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    x = tl.load(x_ptr + rows * x_stride + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    xc = tl.where(mask, x - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / n_cols + eps)
    tl.store(mean_ptr + rows, mean[:, None], mask=rows < n_rows)
    tl.store(rstd_ptr + rows, rstd[:, None], mask=rows < n_rows)
    y = xc * rstd[:, None]
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if HAS_B:
        y = y + tl.load(b_ptr + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(y_ptr + rows * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ln_fwd_looped_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_cols, x_stride, y_stride, eps,
                          BLOCK: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    cols = tl.arange(0, BLOCK)
    # Welford per lane (count, mean, sum of squared deviations), merged across lanes at the end
    cnt = tl.zeros([BLOCK], tl.float32)
    avg = tl.zeros([BLOCK], tl.float32)
    m2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        valid = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=valid, other=0.0).to(tl.float32)
        cnt += tl.where(valid, 1.0, 0.0)
        delta = tl.where(valid, x - avg, 0.0)
        avg += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(valid, x - avg, 0.0)
    mean = tl.sum(cnt * avg, axis=0) / n_cols
    dev = avg - mean
    var = tl.sum(m2 + cnt * dev * dev, axis=0) / n_cols
    rstd = tl.rsqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    n_blocks = tl.cdiv(n_cols, BLOCK)
    for i in range(0, n_blocks):
        start = (n_blocks - 1 - i) * BLOCK  # last block first: it is the one still in L2
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        y = (x - mean) * rstd
        if HAS_W:
            y = y * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add_pair(a1, a2, b1, b2):
    return a1 + b1, a2 + b2


@triton.jit
def _ln_bwd_tile(x, dy, w, mean, rstd, n_cols, HAS_W: tl.constexpr):
    """(dx, dy, xhat) in fp32 for a [ROWS, BLOCK] tile of x and dy: both row means in one reduction.
    Padded columns need no select: dy is 0 there, so their (finite) xhat adds nothing."""
    xhat = (x.to(tl.float32) - mean) * rstd
    dyf = dy.to(tl.float32)
    wdy = dyf * w if HAS_W else dyf
    s1, s2 = tl.reduce((wdy * xhat, wdy), 1, _add_pair)
    dx = (wdy - xhat * (s1[:, None] / n_cols) - s2[:, None] / n_cols) * rstd
    return dx, dyf, xhat


@triton.jit
def _ln_bwd_kernel(x_ptr, w_ptr, dy_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, n_rows, n_cols,
                        x_stride, dy_stride, dx_stride, ROWS: tl.constexpr, BLOCK: tl.constexpr, HAS_W: tl.constexpr,
                        HAS_B: tl.constexpr, STAGES: tl.constexpr):
    # program pid: tiles pid, pid + programs, ...; dx per tile, its dw / db shares summed in registers;
    # STAGES > 0: the tiles pipelined through shared memory by Triton, else the next one prefetched
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)[None, :]
    cmask = cols < n_cols
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    else:
        w = 1.0  # unused
    dw = tl.zeros([ROWS, BLOCK], tl.float32)
    db = tl.zeros([ROWS, BLOCK], tl.float32)
    n_tiles = tl.cdiv(n_rows, ROWS)
    if STAGES == 0:
        rows = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]  # int64: row * stride may pass 2**31
        mask = (rows < n_rows) & cmask
        x = tl.load(x_ptr + rows * x_stride + cols, mask=mask, other=0.0)
        dy = tl.load(dy_ptr + rows * dy_stride + cols, mask=mask, other=0.0)
        mean = tl.load(mean_ptr + rows, mask=rows < n_rows, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=rows < n_rows, other=0.0)
        for _tile in range(pid, n_tiles, programs):
            # load the next tile (and its statistics) while this one is reduced
            next_rows = rows + programs.to(tl.int64) * ROWS
            next_mask = (next_rows < n_rows) & cmask
            x_next = tl.load(x_ptr + next_rows * x_stride + cols, mask=next_mask, other=0.0)
            dy_next = tl.load(dy_ptr + next_rows * dy_stride + cols, mask=next_mask, other=0.0)
            mean_next = tl.load(mean_ptr + next_rows, mask=next_rows < n_rows, other=0.0)
            rstd_next = tl.load(rstd_ptr + next_rows, mask=next_rows < n_rows, other=0.0)
            dx, dyf, xhat = _ln_bwd_tile(x, dy, w, mean, rstd, n_cols, HAS_W)
            tl.store(dx_ptr + rows * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            if HAS_W:
                dw += dyf * xhat
            if HAS_B:
                db += dyf
            rows = next_rows
            mask = next_mask
            x = x_next
            dy = dy_next
            mean = mean_next
            rstd = rstd_next
    else:
        for tile in tl.range(pid, n_tiles, programs, num_stages=STAGES):
            rows = (tile + tl.zeros([], tl.int64)) * ROWS + tl.arange(0, ROWS)[:, None]
            mask = (rows < n_rows) & cmask
            x = tl.load(x_ptr + rows * x_stride + cols, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + rows * dy_stride + cols, mask=mask, other=0.0)
            mean = tl.load(mean_ptr + rows, mask=rows < n_rows, other=0.0)
            rstd = tl.load(rstd_ptr + rows, mask=rows < n_rows, other=0.0)
            dx, dyf, xhat = _ln_bwd_tile(x, dy, w, mean, rstd, n_cols, HAS_W)
            tl.store(dx_ptr + rows * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            if HAS_W:
                dw += dyf * xhat
            if HAS_B:
                db += dyf
    if HAS_W:
        tl.store(dw_part_ptr + pid.to(tl.int64) * n_cols + cols, tl.sum(dw, axis=0)[None, :], mask=cmask)
    if HAS_B:
        tl.store(db_part_ptr + pid.to(tl.int64) * n_cols + cols, tl.sum(db, axis=0)[None, :], mask=cmask)


@triton.jit
def _ln_bwd_looped_kernel(x_ptr, w_ptr, dy_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, n_rows,
                          n_cols, x_stride, dy_stride, dx_stride, BLOCK: tl.constexpr, HAS_W: tl.constexpr,
                          HAS_B: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    dw_row = dw_part_ptr + pid.to(tl.int64) * n_cols  # this program's own shares: no other writer
    db_row = db_part_ptr + pid.to(tl.int64) * n_cols
    for start in range(0, n_cols, BLOCK):
        if HAS_W:
            tl.store(dw_row + start + cols, tl.zeros([BLOCK], tl.float32), mask=start + cols < n_cols)
        if HAS_B:
            tl.store(db_row + start + cols, tl.zeros([BLOCK], tl.float32), mask=start + cols < n_cols)
    n_blocks = tl.cdiv(n_cols, BLOCK)
    for row32 in range(pid, n_rows, programs):
        row = row32 + tl.zeros([], tl.int64)  # int64 (row * stride may pass 2**31), also in the interpreter
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        acc1 = tl.zeros([BLOCK], tl.float32)
        acc2 = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            xhat = tl.where(mask, (tl.load(x_ptr + row * x_stride + start + cols, mask=mask, other=0.0)
                                   .to(tl.float32) - mean) * rstd, 0.0)
            wdy = tl.load(dy_ptr + row * dy_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            if HAS_W:
                wdy = wdy * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            acc1 += wdy * xhat
            acc2 += wdy
        c1 = tl.sum(acc1, axis=0) / n_cols
        c2 = tl.sum(acc2, axis=0) / n_cols
        for i in range(0, n_blocks):
            start = (n_blocks - 1 - i) * BLOCK  # last block first: it is the one still in L2
            mask = start + cols < n_cols
            x = tl.load(x_ptr + row * x_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            xhat = (x - mean) * rstd
            dyf = tl.load(dy_ptr + row * dy_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
            wdy = dyf
            if HAS_W:
                wdy = dyf * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            dx = (wdy - c2 - xhat * c1) * rstd
            tl.store(dx_ptr + row * dx_stride + start + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            if HAS_W:
                dw = tl.load(dw_row + start + cols, mask=mask, other=0.0)
                tl.store(dw_row + start + cols, dw + dyf * xhat, mask=mask)
            if HAS_B:
                db = tl.load(db_row + start + cols, mask=mask, other=0.0)
                tl.store(db_row + start + cols, db + dyf, mask=mask)


@triton.jit
def _ln_bwd_dot_kernel(x_ptr, w_ptr, dy_ptr, mean_ptr, rstd_ptr, dot_ptr, dsum_ptr, n_cols, n_segs, seg_cols,
                       x_stride, dy_stride, BLOCK: tl.constexpr, HAS_W: tl.constexpr):
    # dot[row, seg] = sum(w*dy*xhat), dsum[row, seg] = sum(w*dy) over columns [seg, seg + 1) * seg_cols
    # (no select on xhat: dy is 0 in the padded columns, so theirs adds nothing)
    row = tl.program_id(0).to(tl.int64)
    seg = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    acc1 = tl.zeros([BLOCK], tl.float32)
    acc2 = tl.zeros([BLOCK], tl.float32)
    for start in range(seg * seg_cols, tl.minimum(seg * seg_cols + seg_cols, n_cols), BLOCK):
        mask = start + cols < n_cols
        xhat = (tl.load(x_ptr + row * x_stride + start + cols, mask=mask, other=0.0).to(tl.float32) - mean) * rstd
        wdy = tl.load(dy_ptr + row * dy_stride + start + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_W:
            wdy = wdy * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        acc1 += wdy * xhat
        acc2 += wdy
    tl.store(dot_ptr + row * n_segs + seg, tl.sum(acc1, axis=0))
    tl.store(dsum_ptr + row * n_segs + seg, tl.sum(acc2, axis=0))


@triton.jit
def _ln_bwd_split_kernel(x_ptr, w_ptr, dy_ptr, mean_ptr, rstd_ptr, dot_ptr, dsum_ptr, dx_ptr, dw_part_ptr,
                         db_part_ptr, n_rows, n_cols, n_segs, group_rows, x_stride, dy_stride, dx_stride,
                         ROWS: tl.constexpr, BLOCK: tl.constexpr, SEGS: tl.constexpr, HAS_W: tl.constexpr,
                         HAS_B: tl.constexpr):
    # program (column block, row group): dx of its [group_rows, BLOCK] strip, ROWS rows a step, with
    # the row means of w*dy*xhat and w*dy from the segment sums; its dw and db shares stay in registers
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[None, :]
    cmask = cols < n_cols
    segs = tl.arange(0, SEGS)[None, :]
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    dw = tl.zeros([ROWS, BLOCK], tl.float32)
    db = tl.zeros([ROWS, BLOCK], tl.float32)
    group = tl.program_id(1)
    first = group.to(tl.int64) * group_rows  # int64: row * stride may pass 2**31
    end = tl.minimum(first + group_rows, n_rows)
    rows = first + tl.arange(0, ROWS)[:, None]
    mask = (rows < end) & cmask
    smask = (rows < end) & (segs < n_segs)
    x = tl.load(x_ptr + rows * x_stride + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + rows * dy_stride + cols, mask=mask, other=0.0)
    dots = tl.load(dot_ptr + rows * n_segs + segs, mask=smask, other=0.0)
    dsums = tl.load(dsum_ptr + rows * n_segs + segs, mask=smask, other=0.0)
    mean = tl.load(mean_ptr + rows, mask=rows < end, other=0.0)
    rstd = tl.load(rstd_ptr + rows, mask=rows < end, other=0.0)
    for _step in range(0, tl.cdiv(group_rows, ROWS)):
        # load the next tile while this one is reduced
        next_rows = rows + ROWS
        next_mask = (next_rows < end) & cmask
        next_smask = (next_rows < end) & (segs < n_segs)
        x_next = tl.load(x_ptr + next_rows * x_stride + cols, mask=next_mask, other=0.0)
        dy_next = tl.load(dy_ptr + next_rows * dy_stride + cols, mask=next_mask, other=0.0)
        dots_next = tl.load(dot_ptr + next_rows * n_segs + segs, mask=next_smask, other=0.0)
        dsums_next = tl.load(dsum_ptr + next_rows * n_segs + segs, mask=next_smask, other=0.0)
        mean_next = tl.load(mean_ptr + next_rows, mask=next_rows < end, other=0.0)
        rstd_next = tl.load(rstd_ptr + next_rows, mask=next_rows < end, other=0.0)
        xhat = (x.to(tl.float32) - mean) * rstd  # as _ln_bwd_tile: no select, w*dy - xhat*c1 first
        dyf = dy.to(tl.float32)
        wdy = dyf * w if HAS_W else dyf
        c1 = tl.sum(dots, axis=1)[:, None] / n_cols
        c2 = tl.sum(dsums, axis=1)[:, None] / n_cols
        dx = (wdy - xhat * c1 - c2) * rstd
        tl.store(dx_ptr + rows * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if HAS_W:
            dw += dyf * xhat
        if HAS_B:
            db += dyf
        rows = next_rows
        mask = next_mask
        x = x_next
        dy = dy_next
        dots = dots_next
        dsums = dsums_next
        mean = mean_next
        rstd = rstd_next
    if HAS_W:
        tl.store(dw_part_ptr + group.to(tl.int64) * n_cols + cols, tl.sum(dw, axis=0)[None, :], mask=cmask)
    if HAS_B:
        tl.store(db_part_ptr + group.to(tl.int64) * n_cols + cols, tl.sum(db, axis=0)[None, :], mask=cmask)


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


@triton.jit
def _column_sum_pair_kernel(part_ptr, out0_ptr, out1_ptr, n_parts, n_cols, BLOCK: tl.constexpr):
    # _column_sum_kernel over two [n_parts, n_cols] arrays stacked in part: program (column block, k)
    # sums array k into out_k in the same order (dweight and dbias in one launch)
    PARTS: tl.constexpr = 4096 // BLOCK
    k = tl.program_id(1)
    base = part_ptr + k.to(tl.int64) * n_parts * n_cols
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[None, :]
    parts = tl.arange(0, PARTS)[:, None]
    cmask = cols < n_cols
    acc = tl.zeros([PARTS, BLOCK], tl.float32)
    for p in range(0, n_parts, PARTS):
        acc += tl.load(base + (p + parts).to(tl.int64) * n_cols + cols, mask=cmask & (p + parts < n_parts), other=0.0)
    total = tl.sum(acc, axis=0)[None, :]
    if k == 0:
        tl.store(out0_ptr + cols, total.to(out0_ptr.dtype.element_ty), mask=cmask)
    else:
        tl.store(out1_ptr + cols, total.to(out1_ptr.dtype.element_ty), mask=cmask)


# --------------------------------------------------------------------------------------- launchers

# Under TRITON_INTERPRET=1 @triton.jit gives interpreted functions: the kernels then run on CPU tensors.
INTERPRETING = not isinstance(_ln_fwd_kernel, triton.runtime.JITFunction)


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


def launch_fwd(x, w, b, y, mean, rstd, eps: float) -> None:
    """y, mean and rstd for 2-D x; w and b may be None."""
    n_rows, n_cols = x.shape
    has_w, has_b = w is not None, b is not None
    args = (x, w if has_w else x, b if has_b else x, y, mean, rstd, n_rows, n_cols, x.stride(0), y.stride(0), eps)
    cfg = pick(FWD_TABLE, n_cols)
    if cfg is not None:
        block, rows, warps = cfg
        _ln_fwd_kernel[(triton.cdiv(n_rows, rows),)](*args, ROWS=rows, BLOCK=block, HAS_W=has_w, HAS_B=has_b,
                                                     num_warps=warps)
    else:
        block, warps = LOOP_FWD
        _ln_fwd_looped_kernel[(n_rows,)](*args[:6], *args[7:], BLOCK=block, HAS_W=has_w, HAS_B=has_b,
                                         num_warps=warps)


def _sum_block(n_cols: int) -> int:
    return max(16, min(DW_BLOCK, triton.next_power_of_2(triton.cdiv(n_cols, 64))))


def column_sum(part: torch.Tensor, out: torch.Tensor) -> None:
    """out = part.sum(0) in a fixed order: columns split so that narrow rows still get many programs."""
    n_parts, n_cols = part.shape
    block = _sum_block(n_cols)
    _column_sum_kernel[(triton.cdiv(n_cols, block),)](part, out, n_parts, n_cols, BLOCK=block, num_warps=4)


def _shares(n_parts: int, n_cols: int, has_w: bool, has_b: bool, device: torch.device):
    """(dw shares, db shares, both): fp32 [n_parts, n_cols] arrays, (1,) where there is no weight or
    bias; with both, views of one [2, n_parts, n_cols] array (`both`), else None."""
    if has_w and has_b:
        both = torch.empty((2, n_parts, n_cols), dtype=torch.float32, device=device)
        return both[0], both[1], both
    dw_part = torch.empty((n_parts, n_cols) if has_w else (1,), dtype=torch.float32, device=device)
    db_part = torch.empty((n_parts, n_cols) if has_b else (1,), dtype=torch.float32, device=device)
    return dw_part, db_part, None


def _sum_shares(dw_part, db_part, both, dw, db) -> None:
    """dweight and dbias from the programs' shares: one launch for both when they are stacked."""
    if both is not None:
        n_cols = both.shape[2]
        block = _sum_block(n_cols)
        _column_sum_pair_kernel[(triton.cdiv(n_cols, block), 2)](both, dw, db, both.shape[1], n_cols, BLOCK=block,
                                                                 num_warps=4)
        return
    for part, out in ((dw_part, dw), (db_part, db)):
        if out is not None:
            column_sum(part, out)


def split_segments(n_cols: int) -> tuple[int, int]:
    """(columns a segment, segments) of the split backward's row sums: whole DOT_BWD blocks, at most
    MAX_SEGMENTS of them."""
    seg = DOT_BWD[0] * triton.cdiv(triton.cdiv(n_cols, DOT_BWD[0]), MAX_SEGMENTS)
    return seg, triton.cdiv(n_cols, seg)


def launch_bwd_split(x, w, dy, mean, rstd, dx, dw, db) -> None:
    """launch_bwd for rows too wide for registers: row sums by segments, then [rows, block] tiles."""
    n_rows, n_cols = x.shape
    has_w, has_b = w is not None, db is not None
    _, block, rows, warps, per_sm = SPLIT_BWD
    block = min(block, triton.next_power_of_2(n_cols))
    seg, n_segs = split_segments(n_cols)
    sums = torch.empty((2, n_rows, n_segs), dtype=torch.float32, device=x.device)
    w_t = w if has_w else x
    _ln_bwd_dot_kernel[(n_rows, n_segs)](x, w_t, dy, mean, rstd, sums[0], sums[1], n_cols, n_segs, seg, x.stride(0),
                                         dy.stride(0), BLOCK=min(DOT_BWD[0], triton.next_power_of_2(n_cols)),
                                         HAS_W=has_w, num_warps=DOT_BWD[1], **FMA_OPTIONS)
    col_blocks = triton.cdiv(n_cols, block)
    groups = _programs(x, per_sm, triton.cdiv(n_rows, rows) * col_blocks)
    groups = max(1, min(triton.cdiv(n_rows, rows), triton.cdiv(groups, col_blocks)))
    group_rows = triton.cdiv(n_rows, groups)
    groups = triton.cdiv(n_rows, group_rows)  # no empty group
    dw_part, db_part, both = _shares(groups, n_cols, has_w, has_b, x.device)
    _ln_bwd_split_kernel[(col_blocks, groups)](x, w_t, dy, mean, rstd, sums[0], sums[1], dx, dw_part, db_part, n_rows,
                                               n_cols, n_segs, group_rows, x.stride(0), dy.stride(0), dx.stride(0),
                                               ROWS=rows, BLOCK=block, SEGS=triton.next_power_of_2(n_segs),
                                               HAS_W=has_w, HAS_B=has_b, num_warps=warps, **FMA_OPTIONS)
    _sum_shares(dw_part, db_part, both, dw, db)


def _stages(tile_bytes: int, per_sm: int) -> int:
    """BWD_STAGES, fewer where their buffers (STAGES - 1 tiles a program) would pass STAGE_SMEM; 0 (the
    register prefetch) where not even two stages fit."""
    stages = BWD_STAGES
    while stages >= 2 and (stages - 1) * tile_bytes * per_sm > STAGE_SMEM:
        stages -= 1
    return stages if stages >= 2 else 0


def launch_bwd(x, w, dy, mean, rstd, dx, dw, db) -> None:
    """dx, and dw / db where given, for 2-D x and dy; mean and rstd [rows] fp32."""
    n_rows, n_cols = x.shape
    has_w, has_b = w is not None, db is not None
    cfg = pick(BWD_TABLE, n_cols)
    if cfg is None and triton.next_power_of_2(n_cols) >= SPLIT_BWD[0]:
        launch_bwd_split(x, w, dy, mean, rstd, dx, dw, db)
        return
    block, rows, warps, per_sm = cfg if cfg is not None else (LOOP_BWD[0], 1, *LOOP_BWD[1:])
    programs = _programs(x, per_sm, triton.cdiv(n_rows, rows))
    dw_part, db_part, both = _shares(programs, n_cols, has_w, has_b, x.device)
    args = (x, w if has_w else x, dy, mean, rstd, dx, dw_part, db_part, n_rows, n_cols, x.stride(0), dy.stride(0),
            dx.stride(0))
    if cfg is not None:
        stages = _stages(rows * block * (x.element_size() + dy.element_size()), per_sm)
        _ln_bwd_kernel[(programs,)](*args, ROWS=rows, BLOCK=block, HAS_W=has_w, HAS_B=has_b, STAGES=stages,
                                    num_warps=warps, **(BWD_OPTIONS if n_cols == 1 else FMA_OPTIONS))
    else:
        _ln_bwd_looped_kernel[(programs,)](*args, BLOCK=block, HAS_W=has_w, HAS_B=has_b, num_warps=warps,
                                           **BWD_OPTIONS)
    _sum_shares(dw_part, db_part, both, dw, db)


def _check(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, cpu: bool = False) -> None:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16) + ((torch.float64,) if cpu else ()):
        raise TypeError(f"layer_norm: float32, float16 or bfloat16 input expected, got {x.dtype}")
    if x.dim() == 0:
        raise ValueError("layer_norm: the input needs at least one dimension")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != x.shape[-1:]:
            raise ValueError(f"layer_norm: {name} shape {tuple(p.shape)} does not match the last dim of x "
                             f"{tuple(x.shape)}")


def layer_norm_forward(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The Triton forward: (y, mean, rstd), the statistics in fp32, one per row."""
    _check(x, weight, bias)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    mean = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    rstd = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    if x.numel():
        launch_fwd(_rows(x), None if weight is None else weight.contiguous(),
                   None if bias is None else bias.contiguous(), y.view(-1, x.shape[-1]), mean.view(-1),
                   rstd.view(-1), eps)
    return y, mean, rstd


def layer_norm_backward(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, dy: torch.Tensor,
                        mean: torch.Tensor, rstd: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The Triton backward: (dx, dweight, dbias), None for a missing weight or bias."""
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    dw = None if weight is None else torch.empty(weight.shape, dtype=weight.dtype, device=weight.device)
    db = None if bias is None else torch.empty(bias.shape, dtype=bias.dtype, device=bias.device)
    if x.numel():
        launch_bwd(_rows(x), None if weight is None else weight.contiguous(), _rows(dy.to(x.dtype)),
                   mean.reshape(-1), rstd.reshape(-1), dx.view(-1, x.shape[-1]), dw, db)
    else:
        for g in (dw, db):
            if g is not None:
                g.zero_()
    return dx, dw, db


# -------------------------------------------------------------------------------------- custom ops
# CPU without the interpreter: plain torch in fp32 (the reference path); CUDA: the kernels above.


def _up(t: torch.Tensor) -> torch.Tensor:
    """The CPU path's working precision: fp32, or fp64 for fp64 inputs."""
    return t.double() if t.dtype == torch.float64 else t.float()


def _stat_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _on_triton(t: torch.Tensor) -> bool:
    return t.is_cuda or INTERPRETING


def _torch_fwd(x, weight, bias, eps):
    xf = _up(x)
    mean = xf.mean(-1)
    xc = xf - mean[..., None]
    rstd = torch.rsqrt(xc.pow(2).mean(-1) + eps)
    y = xc * rstd[..., None]
    if weight is not None:
        y = y * _up(weight)
    if bias is not None:
        y = y + _up(bias)
    return y.to(x.dtype).contiguous(), mean, rstd


def _torch_bwd(x, weight, bias, dy, mean, rstd):
    xhat = (_up(x) - mean[..., None]) * rstd[..., None]
    dyf = _up(dy)
    wdy = dyf * _up(weight) if weight is not None else dyf
    dx = (wdy - wdy.mean(-1, keepdim=True) - xhat * (wdy * xhat).mean(-1, keepdim=True)) * rstd[..., None]
    n = x.shape[-1]
    dw = (dyf * xhat).reshape(-1, n).sum(0).to(weight.dtype) if weight is not None else None
    db = dyf.reshape(-1, n).sum(0).to(bias.dtype) if bias is not None else None
    return dx.to(x.dtype).contiguous(), dw, db


def _fwd_impl(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
              eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if _on_triton(x):
        return layer_norm_forward(x, weight, bias, eps)
    _check(x, weight, bias, cpu=True)
    return _torch_fwd(x, weight, bias, eps)


def _bwd_impl(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, dy: torch.Tensor,
              mean: torch.Tensor, rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    run = layer_norm_backward if _on_triton(x) else _torch_bwd
    dx, dw, db = run(x, weight, bias, dy, mean, rstd)
    # an op cannot return None: an empty tensor stands for a missing weight or bias gradient
    return dx, (dw if dw is not None else x.new_empty(0)), (db if db is not None else x.new_empty(0))


def _fwd_fake(x, weight, bias, eps):
    stat = x.new_empty(x.shape[:-1], dtype=_stat_dtype(x))
    return torch.empty_like(x, memory_format=torch.contiguous_format), stat, torch.empty_like(stat)


def _bwd_fake(x, weight, bias, dy, mean, rstd):
    dw = weight.new_empty(weight.shape) if weight is not None else x.new_empty(0)
    db = bias.new_empty(bias.shape) if bias is not None else x.new_empty(0)
    return torch.empty_like(x, memory_format=torch.contiguous_format), dw, db


def _setup(ctx, inputs, output) -> None:
    x, weight, bias, _ = inputs
    ctx.save_for_backward(x, weight, bias, output[1], output[2])


def _backward(ctx, dy, _dmean, _drstd):
    x, weight, bias, mean, rstd = ctx.saved_tensors
    dx, dw, db = torch.ops.kernelagent.layer_norm_bwd(x, weight, bias, dy, mean, rstd)
    return dx, (dw if weight is not None else None), (db if bias is not None else None), None


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


# (y, mean, rstd): y = (x - mean) * rstd * weight + bias in x's dtype, statistics in fp32; differentiable
layer_norm_fwd = _register("layer_norm_fwd", _fwd_impl, _fwd_fake, _backward, _setup)
# (dx, dweight, dbias) from x, weight, bias, the output gradient and the saved statistics
layer_norm_bwd = _register("layer_norm_bwd", _bwd_impl, _bwd_fake)


# -------------------------------------------------------------------------------------- public API


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last dimension (F.layer_norm(x, x.shape[-1:], weight, bias, eps)),
    differentiable in x, weight and bias; output in x's dtype. Any device, fake and meta tensors,
    torch.compile."""
    y, _, _ = torch.ops.kernelagent.layer_norm_fwd(x, weight, bias, float(eps))
    return y


class _LayerNormFunction(torch.autograd.Function):
    """The kernels without the op dispatcher, for ModelNew (the verifier checks them directly)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        y, mean, rstd = layer_norm_forward(x, weight, bias, eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        dx, dw, db = layer_norm_backward(x, weight, bias, dy, mean, rstd)
        return dx, dw, db, None


class ModelNew(nn.Module):
    """Matches reference.py's Model: LayerNorm with `weight` and `bias` parameters."""

    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        # initialised as the reference does (the verifier copies the reference's values in anyway)
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.bfloat16))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden_size)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _LayerNormFunction.apply(x, self.weight, self.bias, self.eps)
