"""Cross-entropy over the last dimension in CuTe DSL, forward and backward, with the options of
triton.py (class weights, ignore_index, mean/sum/none, label smoothing, z-loss, soft-capping) and the
same formulas (see triton.py's docstring).

One CTA per row: each thread streams its 128-bit vectors of the row tile by tile (THREADS x VEC
columns per tile) keeping its own running max and rescaled sum, so the CTA reduces (warp shuffles,
then shared memory) only once per row. With a gradient needed and reduction mean/sum, the same CTA
then sweeps the row again from its end (the tiles read last are the likeliest to still be in L2)
and writes dloss/dlogits for dloss = 1; the target column is fixed up by one thread after a barrier.
The backward scales that gradient in place, skipping the pass when dloss is 1. reduction='none'
re-reads the logits in the backward with the saved logsumexp. Small one-CTA kernels count the kept
rows (the mean's denominator) and sum the row losses in a fixed order (deterministic).
The row width V is a compile-time constant, the row count dynamic: one compile per (V, dtype,
options). Order: kernels -> host launchers -> custom ops -> autograd -> public API.
"""

from __future__ import annotations

import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

# ==== shared row kernels: kept identical in cross_entropy/cute.py and linear_cross_entropy/cute.py ====
REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}
THREADS = 256  # per row; with 128-bit vectors a tile is 2048 bf16 columns
SMALL_THREADS = 256  # the one-CTA setup and reduce kernels
LOG2_E = math.log2(math.e)
LN_2 = math.log(2.0)

# Compiled functions keyed on what the kernels are specialised to (cute.compile does not cache).
_CACHE: dict = {}


# ----------------------------------------------------------------------------- reductions


@cute.jit
def _block_max(val: cutlass.Float32, buf: cute.Tensor, warps: cutlass.Constexpr) -> cutlass.Float32:
    """Max over the CTA: butterfly within each warp, a slot per warp in shared memory, then every
    warp reduces the slots, so all threads get the result. Every thread must call it."""
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    val = cute.arch.warp_reduction(val, cute.arch.fmax)
    if lane == 0:
        buf[warp] = val
    cute.arch.sync_threads()
    out = cutlass.Float32(-math.inf)
    if lane < warps:
        out = buf[lane]
    return cute.arch.warp_reduction(out, cute.arch.fmax)


@cute.jit
def _block_sum(val: cutlass.Float32, buf: cute.Tensor, warps: cutlass.Constexpr) -> cutlass.Float32:
    """Sum over the CTA, same scheme as `_block_max` (each reduction has its own buffer)."""
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    val = cute.arch.warp_reduction(val, lambda a, b: a + b)
    if lane == 0:
        buf[warp] = val
    cute.arch.sync_threads()
    out = cutlass.Float32(0.0)
    if lane < warps:
        out = buf[lane]
    return cute.arch.warp_reduction(out, lambda a, b: a + b)


@cute.jit
def _capped(x, cap: cutlass.Float32, HAS_SOFTCAP: cutlass.Constexpr):
    """cap * tanh(x / cap) (accurate tanh: the approximate one errs by 2^-11)."""
    if cutlass.const_expr(HAS_SOFTCAP):
        x = cap * cute.math.tanh(x / cap)
    return x


# ----------------------------------------------------------------------------- kernels


@cute.kernel
def _setup_kernel(mT: cute.Tensor, mW: cute.Tensor, mDen: cute.Tensor, mWsum: cute.Tensor,
                  ignore_index: cutlass.Int64, N: cutlass.Constexpr, HAS_WEIGHT: cutlass.Constexpr,
                  NEED_WSUM: cutlass.Constexpr):
    """mDen[0] = sum of w_t over kept rows (their count without weights); mWsum[0] = sum of all w."""
    tidx, _, _ = cute.arch.thread_idx()
    smem = cutlass.memory.SmemAllocator()
    buf = smem.allocate_tensor(cutlass.Float32, SMALL_THREADS // 32)
    buf_w = smem.allocate_tensor(cutlass.Float32, SMALL_THREADS // 32)
    n_rows = mT.shape[0]
    acc = cutlass.Float32(0.0)
    for i in range((n_rows + SMALL_THREADS - 1) // SMALL_THREADS):
        r = i * SMALL_THREADS + tidx
        if r < n_rows:
            t = cutlass.Int64(mT[r])
            if t != ignore_index and t >= 0 and t < N:
                if cutlass.const_expr(HAS_WEIGHT):
                    acc += cutlass.Float32(mW[t])
                else:
                    acc += cutlass.Float32(1.0)
    total = _block_sum(acc, buf, SMALL_THREADS // 32)
    wacc = cutlass.Float32(0.0)
    if cutlass.const_expr(NEED_WSUM):
        for i in range((N + SMALL_THREADS - 1) // SMALL_THREADS):
            c = i * SMALL_THREADS + tidx
            if c < N:
                wacc += cutlass.Float32(mW[c])
    wtotal = _block_sum(wacc, buf_w, SMALL_THREADS // 32)
    if tidx == 0:
        mDen[0] = total
        mWsum[0] = wtotal


@cute.kernel
def _reduce_kernel(mLoss: cute.Tensor, mDen: cute.Tensor, mOut: cute.Tensor, MEAN: cutlass.Constexpr):
    """mOut[0] = sum of the row losses (fixed order), divided by mDen[0] for the mean (0/0: NaN)."""
    tidx, _, _ = cute.arch.thread_idx()
    smem = cutlass.memory.SmemAllocator()
    buf = smem.allocate_tensor(cutlass.Float32, SMALL_THREADS // 32)
    n_rows = mLoss.shape[0]
    acc = cutlass.Float32(0.0)
    for i in range((n_rows + SMALL_THREADS - 1) // SMALL_THREADS):
        r = i * SMALL_THREADS + tidx
        if r < n_rows:
            acc += mLoss[r]
    total = _block_sum(acc, buf, SMALL_THREADS // 32)
    if tidx == 0:
        if cutlass.const_expr(MEAN):
            total = total / mDen[0]
        mOut[0] = total.to(mOut.element_type)


@cute.kernel
def _ce_kernel(mX: cute.Tensor, mT: cute.Tensor, mW: cute.Tensor, mDen: cute.Tensor, mWsum: cute.Tensor,
               mLoss: cute.Tensor, mLse: cute.Tensor, mDl: cute.Tensor, mG: cute.Tensor,
               ignore_index: cutlass.Int64, eps: cutlass.Float32, z: cutlass.Float32, cap: cutlass.Float32,
               copy_x: cute.TiledCopy, copy_w: cute.TiledCopy, N: cutlass.Constexpr, VEC: cutlass.Constexpr,
               HAS_WEIGHT: cutlass.Constexpr, SMOOTH: cutlass.Constexpr, HAS_Z: cutlass.Constexpr,
               HAS_SOFTCAP: cutlass.Constexpr, MODE: cutlass.Constexpr, REDUCTION: cutlass.Constexpr):
    """One row per CTA. MODE 0: loss and logsumexp. MODE 1: also dlogits for dloss = 1 into mG (which
    may be mX). MODE 2: dlogits from the saved logsumexp times dloss (REDUCTION 0: per row)."""
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    smem = cutlass.memory.SmemAllocator()
    buf_max = smem.allocate_tensor(cutlass.Float32, THREADS // 32)
    buf_sum = smem.allocate_tensor(cutlass.Float32, THREADS // 32)
    buf_sx = smem.allocate_tensor(cutlass.Float32, THREADS // 32)
    tile = THREADS * VEC
    n_tiles = (N + tile - 1) // tile
    g_row = mX[row, None]
    o_row = mG[row, None]
    c_row = cute.make_identity_tensor(N)
    thr_x = copy_x.get_slice(tidx)
    thr_w = copy_w.get_slice(tidx)

    t = cutlass.Int64(mT[row])
    kept = t != ignore_index and t >= 0 and t < N
    if not kept:
        t = cutlass.Int64(0)
    wt = cutlass.Float32(1.0)
    if cutlass.const_expr(HAS_WEIGHT):
        wt = cutlass.Float32(mW[t])
    wsum = cutlass.Float32(N)
    if cutlass.const_expr(SMOOTH and HAS_WEIGHT):
        wsum = mWsum[0]
    xt = _capped(cutlass.Float32(g_row[t]), cap, HAS_SOFTCAP)

    lse = cutlass.Float32(0.0)
    scale = cutlass.Float32(1.0)
    if cutlass.const_expr(MODE == 2):
        lse = mLse[row]
        if cutlass.const_expr(REDUCTION == 0):
            scale = mDl[row]
        else:
            scale = mDl[0]
        if cutlass.const_expr(REDUCTION == 2):
            scale = scale / mDen[0]
    else:
        m = cutlass.Float32(-math.inf)  # this thread's running max and rescaled sum
        s = cutlass.Float32(0.0)
        sx = cutlass.Float32(0.0)
        for i in range(n_tiles):
            t_x = thr_x.partition_S(cute.local_tile(g_row, (tile,), (i,)))
            t_c = thr_x.partition_S(cute.local_tile(c_row, (tile,), (i,)))
            if cute.elem_less(t_c[0], N):  # N % VEC == 0: a vector is all in or all out
                r_x = cute.make_fragment_like(t_x)
                cute.copy(copy_x, t_x, r_x)
                x = _capped(r_x.load().to(cutlass.Float32), cap, HAS_SOFTCAP)
                m_new = cute.arch.fmax(m, x.reduce(cute.ReductionOp.MAX, -math.inf, 0))
                e = cute.math.exp2((x - m_new) * LOG2_E, fastmath=True)
                s = s * cute.math.exp2((m - m_new) * LOG2_E, fastmath=True) + e.reduce(cute.ReductionOp.ADD, 0.0, 0)
                m = m_new
                if cutlass.const_expr(SMOOTH):
                    if cutlass.const_expr(HAS_WEIGHT):
                        t_w = thr_w.partition_S(cute.local_tile(mW, (tile,), (i,)))
                        r_w = cute.make_fragment_like(t_w)
                        cute.copy(copy_w, t_w, r_w)
                        sx += (x * r_w.load().reshape(x.shape)).reduce(cute.ReductionOp.ADD, 0.0, 0)
                    else:
                        sx += x.reduce(cute.ReductionOp.ADD, 0.0, 0)
        row_max = _block_max(m, buf_max, THREADS // 32)
        total = _block_sum(s * cute.math.exp2((m - row_max) * LOG2_E, fastmath=True), buf_sum, THREADS // 32)
        lse = row_max + cute.math.log(total)
        loss = wt * (1.0 - eps) * (lse - xt)
        if cutlass.const_expr(SMOOTH):
            loss += eps / N * (wsum * lse - _block_sum(sx, buf_sx, THREADS // 32))
        if cutlass.const_expr(HAS_Z):
            loss += z * lse * lse
        if not kept:
            loss = cutlass.Float32(0.0)
        if tidx == 0:
            mLoss[row] = loss
            mLse[row] = lse
        if cutlass.const_expr(REDUCTION == 2):
            scale = 1.0 / mDen[0]

    if cutlass.const_expr(MODE != 0):
        if not kept:
            scale = cutlass.Float32(0.0)
        # dx'_c = a p_c - b [c = t] - c_s w_c (formulas in triton.py), times the softcap's derivative
        b = scale * wt * (1.0 - eps)
        a = b + scale * eps * wsum / N
        if cutlass.const_expr(HAS_Z):
            a += scale * 2.0 * z * lse
        c_s = scale * eps / N
        for j in range(n_tiles):
            i = j
            if cutlass.const_expr(MODE == 1):
                i = n_tiles - 1 - j
            t_x = thr_x.partition_S(cute.local_tile(g_row, (tile,), (i,)))
            t_o = thr_x.partition_D(cute.local_tile(o_row, (tile,), (i,)))
            t_c = thr_x.partition_S(cute.local_tile(c_row, (tile,), (i,)))
            if cute.elem_less(t_c[0], N):
                r_x = cute.make_fragment_like(t_x)
                cute.copy(copy_x, t_x, r_x)
                x = _capped(r_x.load().to(cutlass.Float32), cap, HAS_SOFTCAP)
                g = cute.math.exp2((x - lse) * LOG2_E, fastmath=True) * a
                if cutlass.const_expr(SMOOTH):
                    if cutlass.const_expr(HAS_WEIGHT):
                        t_w = thr_w.partition_S(cute.local_tile(mW, (tile,), (i,)))
                        r_w = cute.make_fragment_like(t_w)
                        cute.copy(copy_w, t_w, r_w)
                        g = g - r_w.load().reshape(x.shape) * c_s
                    else:
                        g = g - c_s
                if cutlass.const_expr(HAS_SOFTCAP):
                    g = g * (1.0 - (x / cap) * (x / cap))
                r_o = cute.make_fragment_like(t_o)
                r_o.store(g.to(mG.element_type))
                cute.copy(copy_x, r_o, t_o)
        cute.arch.sync_threads()  # the vector holding the target column is written; now fix that column
        if tidx == 0:
            gt = cute.math.exp2((xt - lse) * LOG2_E, fastmath=True) * a - b
            if cutlass.const_expr(SMOOTH):
                gt = gt - c_s * wt
            if cutlass.const_expr(HAS_SOFTCAP):
                gt = gt * (1.0 - (xt / cap) * (xt / cap))
            o_row[t] = gt.to(mG.element_type)


@cute.kernel
def _scale_kernel(mG: cute.Tensor, mDl: cute.Tensor, copy_x: cute.TiledCopy, N: cutlass.Constexpr,
                  VEC: cutlass.Constexpr, PER_ROW: cutlass.Constexpr):
    """mG[row] *= dloss (mDl[row] or mDl[0]) in place, one CTA per row; nothing to do where it is 1."""
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    g = mDl[0]
    if cutlass.const_expr(PER_ROW):
        g = mDl[row]
    if g != 1.0:
        tile = THREADS * VEC
        o_row = mG[row, None]
        c_row = cute.make_identity_tensor(N)
        thr = copy_x.get_slice(tidx)
        for i in range((N + tile - 1) // tile):
            t_o = thr.partition_D(cute.local_tile(o_row, (tile,), (i,)))
            t_c = thr.partition_S(cute.local_tile(c_row, (tile,), (i,)))
            if cute.elem_less(t_c[0], N):
                r = cute.make_fragment_like(t_o)
                cute.copy(copy_x, t_o, r)
                r.store((r.load().to(cutlass.Float32) * g).to(mG.element_type))
                cute.copy(copy_x, r, t_o)


# ----------------------------------------------------------------------------- host launchers


def _copies(x_type, w_type, vec: int):
    atom_x = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), x_type, num_bits_per_copy=x_type.width * vec)
    atom_w = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), w_type, num_bits_per_copy=min(128, w_type.width * vec))
    threads, values = cute.make_layout(THREADS), cute.make_layout(vec)
    return cute.make_tiled_copy_tv(atom_x, threads, values), cute.make_tiled_copy_tv(atom_w, threads, values)


@cute.jit
def _launch_setup(mT: cute.Tensor, mW: cute.Tensor, mDen: cute.Tensor, mWsum: cute.Tensor,
                  ignore_index: cutlass.Int64, stream: cuda.CUstream, N: cutlass.Constexpr,
                  HAS_WEIGHT: cutlass.Constexpr, NEED_WSUM: cutlass.Constexpr):
    _setup_kernel(mT, mW, mDen, mWsum, ignore_index, N, HAS_WEIGHT, NEED_WSUM).launch(
        grid=[1, 1, 1], block=[SMALL_THREADS, 1, 1], stream=stream)


@cute.jit
def _launch_reduce(mLoss: cute.Tensor, mDen: cute.Tensor, mOut: cute.Tensor, stream: cuda.CUstream,
                   MEAN: cutlass.Constexpr):
    _reduce_kernel(mLoss, mDen, mOut, MEAN).launch(grid=[1, 1, 1], block=[SMALL_THREADS, 1, 1], stream=stream)
# ==== end of the shared row kernels ====


@cute.jit
def _launch_rows(mX: cute.Tensor, mT: cute.Tensor, mW: cute.Tensor, mDen: cute.Tensor, mWsum: cute.Tensor,
                 mLoss: cute.Tensor, mLse: cute.Tensor, mDl: cute.Tensor, mG: cute.Tensor,
                 ignore_index: cutlass.Int64, eps: cutlass.Float32, z: cutlass.Float32, cap: cutlass.Float32,
                 stream: cuda.CUstream, N: cutlass.Constexpr, VEC: cutlass.Constexpr, HAS_WEIGHT: cutlass.Constexpr,
                 SMOOTH: cutlass.Constexpr, HAS_Z: cutlass.Constexpr, HAS_SOFTCAP: cutlass.Constexpr,
                 MODE: cutlass.Constexpr, REDUCTION: cutlass.Constexpr):
    copy_x, copy_w = _copies(mX.element_type, mW.element_type, VEC)
    _ce_kernel(mX, mT, mW, mDen, mWsum, mLoss, mLse, mDl, mG, ignore_index, eps, z, cap, copy_x, copy_w, N, VEC,
               HAS_WEIGHT, SMOOTH, HAS_Z, HAS_SOFTCAP, MODE, REDUCTION).launch(
        grid=[mX.shape[0], 1, 1], block=[THREADS, 1, 1], stream=stream)


@cute.jit
def _launch_scale(mG: cute.Tensor, mDl: cute.Tensor, stream: cuda.CUstream, N: cutlass.Constexpr,
                  VEC: cutlass.Constexpr, PER_ROW: cutlass.Constexpr):
    copy_x, _ = _copies(mG.element_type, mG.element_type, VEC)
    _scale_kernel(mG, mDl, copy_x, N, VEC, PER_ROW).launch(grid=[mG.shape[0], 1, 1], block=[THREADS, 1, 1],
                                                          stream=stream)


def _vector_width(n: int, t: torch.Tensor, *others: torch.Tensor) -> int:
    """Widest vector (16 bytes of t at most) dividing the row that every base pointer is aligned to."""
    vec = 16 // t.element_size()
    while vec > 1 and (n % vec or any(u.data_ptr() % min(16, vec * u.element_size()) for u in (t, *others))):
        vec //= 2
    return vec


def _rows_arg(t: torch.Tensor, vec: int):
    """(M, N) row-major with M dynamic, N and the row stride static, the base aligned to VEC."""
    return from_dlpack(t.detach(), assumed_align=vec * t.element_size()).mark_compact_shape_dynamic(
        mode=0, stride_order=(0, 1))


def _vec_arg(t: torch.Tensor):
    """A 1-D tensor with a dynamic length (targets, per-row values, one-element buffers)."""
    return from_dlpack(t.detach(), assumed_align=t.element_size()).mark_layout_dynamic()


def _static_arg(t: torch.Tensor, vec: int):
    """A 1-D tensor of static length, aligned to its vectors (the class weights)."""
    return from_dlpack(t.detach(), assumed_align=min(16, vec * t.element_size()))


def _stream(t: torch.Tensor) -> cuda.CUstream:
    return cuda.CUstream(torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0)


def _run(name: str, fn, key: tuple, args: list, static: tuple) -> None:
    """Compile once per key (the DSL does not cache), then launch."""
    compiled = _CACHE.get((name, *key))
    if compiled is None:
        compiled = cute.compile(fn, *args, *static)
        _CACHE[(name, *key)] = compiled
    compiled(*args)


def _setup(t: torch.Tensor, w: torch.Tensor | None, n_cols: int, ignore_index: int, smooth: bool):
    denom = torch.empty(1, dtype=torch.float32, device=t.device)
    wsum = torch.empty(1, dtype=torch.float32, device=t.device)
    w_arg = w if w is not None else denom
    flags = (w is not None, w is not None and smooth)
    args = [_vec_arg(t), _vec_arg(w_arg), _vec_arg(denom), _vec_arg(wsum), cutlass.Int64(ignore_index), _stream(t)]
    _run("setup", _launch_setup, (t.dtype, t.device.type, n_cols, *flags), args, (n_cols, *flags))
    return denom, wsum


def _rows(x, t, w, denom, wsum, loss, lse, dloss, grad, options, mode: int) -> None:
    ignore_index, reduction, eps, z, cap = options
    n_cols = x.shape[1]
    vec = _vector_width(n_cols, x, grad, *([w] if w is not None else []))
    w_arg = w if w is not None else denom
    flags = (w is not None, eps > 0.0, z > 0.0, cap is not None, mode, REDUCTIONS[reduction])
    args = [_rows_arg(x, vec), _vec_arg(t), _static_arg(w_arg, vec), _vec_arg(denom), _vec_arg(wsum), _vec_arg(loss),
            _vec_arg(lse), _vec_arg(dloss), _rows_arg(grad, vec), cutlass.Int64(ignore_index), cutlass.Float32(eps),
            cutlass.Float32(z), cutlass.Float32(cap or 1.0), _stream(x)]
    key = (x.dtype, t.dtype, x.device.type, n_cols, vec, *flags)
    _run("rows", _launch_rows, key, args, (n_cols, vec, *flags))


def _reduce(row_loss: torch.Tensor, denom: torch.Tensor, out: torch.Tensor, mean: bool) -> None:
    args = [_vec_arg(row_loss), _vec_arg(denom), _vec_arg(out.view(1)), _stream(row_loss)]
    _run("reduce", _launch_reduce, (out.dtype, row_loss.device.type, mean), args, (mean,))


def _scale(grad: torch.Tensor, dloss: torch.Tensor) -> None:
    """grad [N, V] *= dloss (0-dim, or [N]) in place."""
    n_cols = grad.shape[1]
    vec = _vector_width(n_cols, grad)
    per_row = dloss.dim() > 0
    dl = dloss.reshape(-1).to(torch.float32).contiguous()
    args = [_rows_arg(grad, vec), _vec_arg(dl), _stream(grad)]
    _run("scale", _launch_scale, (grad.dtype, grad.device.type, n_cols, vec, per_row), args, (n_cols, vec, per_row))


# ----------------------------------------------------------------------------- forward / backward


def _check(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, reduction: str,
           softcap: float | None) -> None:
    if logits.dim() < 1 or target.shape != logits.shape[:-1]:
        raise ValueError(f"expected logits [..., V] and target [...] with the same leading shape; got "
                         f"{tuple(logits.shape)} and {tuple(target.shape)}")
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"logits must be float32, float16 or bfloat16, got {logits.dtype}")
    if target.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"target must be int64 or int32, got {target.dtype}")
    if weight is not None and (weight.dim() != 1 or weight.shape[0] != logits.shape[-1]):
        raise ValueError(f"weight must have shape [{logits.shape[-1]}], got {tuple(weight.shape)}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {sorted(REDUCTIONS)}, got {reduction!r}")
    if softcap is not None and not softcap > 0.0:
        raise ValueError(f"softcap must be positive or None, got {softcap}")


def _flat(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None):
    x = logits.reshape(-1, logits.shape[-1])
    x = x if x.is_contiguous() else x.contiguous()  # the kernels take compact rows
    w = weight.to(torch.float32).contiguous() if weight is not None else None
    return x, target.reshape(-1).contiguous(), w


def _forward(logits, target, weight, options, grad_mode: str | None):
    """(loss, lse, denom, grad): grad_mode None (no gradient), "new" or "inplace" (dloss = 1)."""
    ignore_index, reduction, eps, _, _ = options
    x, t, w = _flat(logits, target, weight)
    n_rows, n_cols = x.shape
    denom, wsum = _setup(t, w, n_cols, ignore_index, eps > 0.0)
    row_loss = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    lse = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    grad = None if grad_mode is None else (x if grad_mode == "inplace" else torch.empty_like(x))
    if n_rows:
        _rows(x, t, w, denom, wsum, row_loss, lse, lse, grad if grad is not None else x, options,
              0 if grad is None else 1)
    if reduction == "none":
        loss = row_loss.to(x.dtype).view(target.shape)
    else:
        loss = torch.empty((), dtype=x.dtype, device=x.device)
        _reduce(row_loss, denom, loss, reduction == "mean")
    return loss, lse, denom, grad


def _backward(logits, target, weight, lse, denom, dloss, options) -> torch.Tensor:
    ignore_index, reduction, eps, _, _ = options
    x, t, w = _flat(logits, target, weight)
    _, wsum = _setup(t, w, x.shape[1], ignore_index, eps > 0.0)
    grad = torch.empty_like(x)
    dl = dloss.reshape(-1).to(torch.float32).contiguous()
    if x.shape[0]:
        _rows(x, t, w, denom, wsum, lse, lse, dl, grad, options, 2)
    return grad.view(logits.shape)


# ----------------------------------------------------------------------------------- custom ops


def _register(name: str, impl, fake, mutates_args=(), autograd=None):
    """`impl` as the torch custom op `kernelagent::<name>` (once per process), with a fake."""
    if hasattr(torch.ops.kernelagent, name):
        return getattr(torch.ops.kernelagent, name)
    op = torch.library.custom_op(f"kernelagent::{name}", impl, mutates_args=mutates_args)
    op.register_fake(fake)
    if autograd is not None:
        op.register_autograd(autograd[0], setup_context=autograd[1])
    return op


class NoGPUError(RuntimeError):
    """The CuTe DSL kernels need a CUDA GPU (the CPU path is triton.py's)."""


def _need_cuda(t: torch.Tensor) -> None:
    if not t.is_cuda:
        raise NoGPUError("the CuTe DSL cross-entropy runs on CUDA tensors only; on CPU use "
                         "kernelagent.kernels.cross_entropy.triton (plain torch there)")


def _fwd_impl(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
              ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0, z_loss: float = 0.0,
              softcap: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _need_cuda(logits)
    _check(logits, target, weight, reduction, softcap)
    options = (ignore_index, reduction, label_smoothing, z_loss, softcap)
    loss, lse, denom, _ = _forward(logits, target, weight, options, None)
    return loss, lse, denom.view(())


def _fwd_fake(logits, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, z_loss=0.0,
              softcap=None):
    loss = logits.new_empty(target.shape if reduction == "none" else ())
    return loss, logits.new_empty((target.numel(),), dtype=torch.float32), logits.new_empty((), dtype=torch.float32)


def _bwd_impl(logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, denom: torch.Tensor,
              dloss: torch.Tensor, weight: torch.Tensor | None = None, ignore_index: int = -100,
              reduction: str = "mean", label_smoothing: float = 0.0, z_loss: float = 0.0,
              softcap: float | None = None) -> torch.Tensor:
    _need_cuda(logits)
    options = (ignore_index, reduction, label_smoothing, z_loss, softcap)
    return _backward(logits, target, weight, lse, denom.view(1), dloss, options)


def _bwd_fake(logits, target, lse, denom, dloss, weight=None, ignore_index=-100, reduction="mean",
              label_smoothing=0.0, z_loss=0.0, softcap=None):
    return torch.empty_like(logits, memory_format=torch.contiguous_format)


def _fwd_setup(ctx, inputs, output) -> None:
    logits, target, weight, ignore_index, reduction, label_smoothing, z_loss, softcap = inputs
    _, lse, denom = output
    ctx.save_for_backward(logits, target, weight, lse, denom)
    ctx.options = {"ignore_index": ignore_index, "reduction": reduction, "label_smoothing": label_smoothing,
                   "z_loss": z_loss, "softcap": softcap}
    ctx.set_materialize_grads(False)


def _fwd_backward(ctx, dloss, _dlse, _ddenom):
    logits, target, weight, lse, denom = ctx.saved_tensors
    if dloss is None:
        return None, None, None, None, None, None, None, None
    grad = cross_entropy_cute_bwd(logits, target, lse, denom, dloss, weight, **ctx.options)
    return grad, None, None, None, None, None, None, None


cross_entropy_cute_bwd = _register("cross_entropy_cute_bwd", _bwd_impl, _bwd_fake)
# (loss, lse, denom) like kernelagent::cross_entropy_fwd, by the CuTe DSL kernels; differentiable
cross_entropy_cute_fwd = _register("cross_entropy_cute_fwd", _fwd_impl, _fwd_fake,
                                   autograd=(_fwd_backward, _fwd_setup))


def _compiling() -> bool:
    return torch.compiler.is_compiling()


# ------------------------------------------------------------------------------------- autograd


class _CrossEntropyFunction(torch.autograd.Function):
    """Eager autograd over the launchers. Mean/sum, or inplace_backward: the forward writes the
    gradient and the backward scales it; 'none': the backward re-reads the logits."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, ignore_index: int,
                reduction: str, label_smoothing: float, z_loss: float, softcap: float | None, inplace: bool):
        options = (ignore_index, reduction, label_smoothing, z_loss, softcap)
        _check(logits, target, weight, reduction, softcap)
        ctx.fused = inplace or reduction != "none"
        mode = ("inplace" if inplace else "new") if ctx.fused else None
        loss, lse, denom, grad = _forward(logits, target, weight, options, mode)
        if ctx.fused:
            ctx.save_for_backward(grad)
        else:
            ctx.save_for_backward(logits, target, weight, lse, denom)
            ctx.options = options
        ctx.shape = logits.shape
        return loss

    @staticmethod
    def backward(ctx, dloss):
        if ctx.fused:
            (grad,) = ctx.saved_tensors
            _scale(grad, dloss)
            grad = grad.view(ctx.shape)
        else:
            logits, target, weight, lse, denom = ctx.saved_tensors
            grad = _backward(logits, target, weight, lse, denom, dloss, ctx.options)
        return grad, None, None, None, None, None, None, None, None


# ----------------------------------------------------------------------------------- public API


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, *, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0, z_loss: float = 0.0,
                  softcap: float | None = None, weight: torch.Tensor | None = None,
                  inplace_backward: bool = False) -> torch.Tensor:
    """Same contract as triton.py's cross_entropy, by the CuTe DSL kernels (CUDA only: the plain-torch
    CPU path is triton.py's; under torch.compile the registered forward and backward ops run, without
    the in-forward gradient)."""
    ls, z = float(label_smoothing), float(z_loss)
    cap = None if softcap is None else float(softcap)
    if _compiling():
        return cross_entropy_cute_fwd(logits, target, weight, ignore_index, reduction, ls, z, cap)[0]
    if torch.is_grad_enabled() and logits.requires_grad:
        return _CrossEntropyFunction.apply(logits, target, weight, ignore_index, reduction, ls, z, cap,
                                           inplace_backward)
    _check(logits, target, weight, reduction, softcap)
    return _forward(logits, target, weight, (ignore_index, reduction, ls, z, cap), None)[0]


class ModelNew(nn.Module):
    """Matches reference.py's Model (the options come with the inputs), straight over the kernels."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
                reduction: str = "mean", label_smoothing: float = 0.0, z_loss: float = 0.0,
                softcap: float | None = None, ignore_index: int = -100) -> torch.Tensor:
        w = weight.detach() if weight is not None else None  # class weights carry no gradient
        if torch.is_grad_enabled() and logits.requires_grad:
            return _CrossEntropyFunction.apply(logits, target, w, ignore_index, reduction, label_smoothing, z_loss,
                                               softcap, False)
        _check(logits, target, w, reduction, softcap)
        return _forward(logits, target, w, (ignore_index, reduction, label_smoothing, z_loss, softcap), None)[0]
