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

import functools
import math
from dataclasses import dataclass

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}
THREADS = 256  # per row; with 128-bit vectors a tile is 2048 bf16 columns
# The forward holds rows of 16K to 128K columns (REGISTER_THREADS x 8 CTAs x REGISTER_VALUES) in
# registers (_ce_rows_kernel, persistent: read once); others, weighted label smoothing (the weights would
# be held too: ptxas spills) and the backward of reduction='none' are streamed (_ce_kernel).
# PERSISTENT_CLUSTERS: None, as many as are resident at once (see _clusters).
ROWS_IN_REGISTERS = True
REGISTER_VALUES = 32
REGISTER_THREADS = 512
PERSISTENT_CLUSTERS: int | None = None
SMALL_THREADS = 256  # the one-CTA setup and reduce kernels
LOG2_E = math.log2(math.e)
LN_2 = math.log(2.0)
FLT_MAX = 3.4028234663852886e38

# ---- row engine: shared by the row-wise cute.py files (softmax, log_softmax, rms_norm, layer_norm, cross_entropy) ----
MAX_THREADS = 1024  # a CTA; one row may use all of them
MAX_CTA_THREADS_PER_ROW = 512  # wider rows go to a cluster first (two CTAs of 512 threads fit one SM)
MAX_CLUSTER = 8  # the portable cluster size on sm_90
MIN_CTA_THREADS = 128  # short rows: several rows per CTA


@dataclass(frozen=True)
class Tiling:
    """How a row of n columns is spread: VEC-element vectors, TPR threads of a CTA per row, CLUSTER
    CTAs per row, VPT vectors per thread, ROWS rows per CTA."""

    n: int
    vec: int
    tpr: int
    cluster: int
    vpt: int
    rows: int

    @property
    def threads(self) -> int:
        return self.tpr * self.rows

    @property
    def cols(self) -> int:  # the columns of one CTA's tile
        return self.tpr * self.vpt * self.vec


def tiling(n: int, vec: int, values: int) -> Tiling:
    """The tiling of rows of n columns in vectors of vec elements, about `values` per thread."""
    vectors = -(-n // vec)
    per_thread = max(1, values // vec)
    cluster = 1
    tpr = _pow2_at_least(-(-vectors // per_thread))
    while tpr > MAX_CTA_THREADS_PER_ROW and cluster < MAX_CLUSTER:
        cluster *= 2
        tpr = _pow2_at_least(-(-vectors // (per_thread * cluster)))
    tpr = min(tpr, MAX_THREADS)
    vpt = -(-vectors // (tpr * cluster))
    if vpt * vec > 4 * values:
        raise ValueError(f"rows of {n} columns are too wide for this kernel (at most about "
                         f"{MAX_THREADS * MAX_CLUSTER * values * 4} elements)")
    while cluster > 1 and (cluster - 1) * tpr * vpt >= vectors:  # every CTA of a cluster owns columns
        cluster //= 2
    vpt = -(-vectors // (tpr * cluster))
    rows = max(1, MIN_CTA_THREADS // tpr) if cluster == 1 else 1
    return Tiling(n=n, vec=vec, tpr=tpr, cluster=cluster, vpt=vpt, rows=rows)


def _pow2_at_least(k: int) -> int:
    p = 1
    while p < k:
        p *= 2
    return p


def make_tiled_copy(dtype, t: Tiling) -> cute.TiledCopy:
    """Threads (ROWS, TPR) row-major, each copying VEC contiguous elements (in 128-bit atoms at most)."""
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), dtype, num_bits_per_copy=min(128, dtype.width * t.vec))
    threads = cute.make_ordered_layout((t.rows, t.tpr), order=(1, 0))
    return cute.make_tiled_copy_tv(atom, threads, cute.make_layout((1, t.vec)))


def bounds_predicate(tXcX: cute.Tensor, shape) -> cute.Tensor:
    """One predicate per copy atom of a thread's partition ((atom, rest_v), rest_m, rest_n): the atom
    starts inside the (rows, n) tensor (n % VEC == 0, so an atom is all in or all out)."""
    reps, rest_m, rest_n = cute.size(tXcX, mode=[0, 1]), cute.size(tXcX, mode=[1]), cute.size(tXcX, mode=[2])
    pred = cute.make_rmem_tensor(cute.make_layout((reps, rest_m, rest_n), stride=(rest_m * rest_n, rest_n, 1)),
                                 cutlass.Boolean)
    for v in range(reps):
        for m in range(rest_m):
            for k in range(rest_n):
                pred[v, m, k] = cute.elem_less(tXcX[(0, v), m, k], shape)
    return pred


# The helpers below are plain functions called while a kernel is traced (their Python loops unroll
# then). `coord` is (row tile, column tile); the column tile is the CTA's rank in its cluster.


def _parts(m: cute.Tensor, t: Tiling, tidx, coord, dst: bool):
    tiled = make_tiled_copy(m.element_type, t)
    thr = tiled.get_slice(tidx)
    g = cute.local_tile(m, (t.rows, t.cols), coord)
    c = cute.local_tile(cute.make_identity_tensor(m.shape), (t.rows, t.cols), coord)
    part = thr.partition_D(g) if dst else thr.partition_S(g)
    return tiled, part, bounds_predicate(thr.partition_S(c), m.shape)


def load_tile(m: cute.Tensor, t: Tiling, tidx, coord, fill: float, shape=None):
    """This thread's share of the (ROWS, COLS) tile `coord` of m, in fp32; `fill` outside m. With
    `shape`, in that shape (the same elements, in order: a wider dtype copies in more atoms)."""
    tiled, part, pred = _parts(m, t, tidx, coord, dst=False)
    frag = cute.make_fragment_like(part)
    frag.fill(fill)
    cute.copy(tiled, part, frag, pred=pred)
    value = frag.load().to(cutlass.Float32)
    return value if shape is None else as_shape(value, shape)


def store_tile(m: cute.Tensor, t: Tiling, tidx, coord, value) -> None:
    """Write this thread's share of tile `coord` (a TensorSSA holding its elements in order) into m."""
    tiled, part, pred = _parts(m, t, tidx, coord, dst=True)
    frag = cute.make_fragment_like(part)
    frag.store(as_shape(value, frag.shape).to(m.element_type))
    cute.copy(tiled, frag, part, pred=pred)


def as_shape(value, shape):
    """The TensorSSA `value` with its elements (in flat order) laid out in `shape`."""
    if value.shape == shape:
        return value
    src = cute.make_rmem_tensor(value.shape, value.dtype)
    src.store(value)
    dst = cute.make_rmem_tensor(shape, value.dtype)
    for i in range(cute.size(dst)):
        dst[i] = src[i]
    return dst.load()


def broadcast_rows(v: cute.Tensor, like: cute.Tensor) -> cute.Tensor:
    """A (N,) vector seen as the (M, N) tensor `like` with every row equal (row stride 0)."""
    return cute.make_tensor(v.iterator, cute.make_layout(like.shape, stride=(0, 1)))


def column_mask(m: cute.Tensor, t: Tiling, tidx, coord):
    """True where this thread's element of tile `coord` is a column of m (a TensorSSA shaped as
    load_tile's), or None when every tile is full: for reductions that padding would disturb."""
    if t.cols * t.cluster == t.n:
        return None
    tiled = make_tiled_copy(m.element_type, t)
    c = tiled.get_slice(tidx).partition_S(cute.local_tile(cute.make_identity_tensor(m.shape), (t.rows, t.cols),
                                                                 coord))
    mask = cute.make_fragment_like(c, cutlass.Boolean)
    for i in range(cute.size(c)):
        mask[i] = cute.elem_less(c[i][1], t.n)
    return mask.load()


def row_of(t: Tiling, tidx, tile):
    """The row of tile `tile` whose share this thread holds."""
    return tile * t.rows + tidx // t.tpr


def sync_row_group(cluster: int) -> None:
    """Wait until every thread of the row group (the CTA, or the cluster) is here: before a reduction
    buffer is reused, and before a CTA whose partials its peers read may exit."""
    if cluster > 1:
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
    else:
        cute.arch.sync_threads()


def reduction_buffer(smem, t: Tiling) -> cute.Tensor:
    warps = max(t.tpr // 32, 1)
    return smem.allocate_tensor(cutlass.Float32, cute.make_layout((t.rows, warps), stride=(warps, 1)))


@cute.jit
def row_reduce(val: cutlass.Float32, op: cutlass.Constexpr, init: cutlass.Constexpr, buf: cute.Tensor,
               tpr: cutlass.Constexpr, cluster: cutlass.Constexpr) -> cutlass.Float32:
    """Reduce one value per thread over the threads (and CTAs) of its row; every thread gets the result.
    `buf` is this reduction's own shared buffer (ROWS, warps per row): buffers are never reused within
    a launch, so no barrier is needed after reading them."""
    val = cute.arch.warp_reduction(val, op, threads_in_group=min(tpr, 32))
    warps_per_row = cutlass.const_expr(max(tpr // 32, 1))
    if cutlass.const_expr(warps_per_row > 1 or cluster > 1):
        lane, warp = cute.arch.lane_idx(), cute.arch.warp_idx()
        row, slot = warp // warps_per_row, warp % warps_per_row
        if lane == 0:
            buf[row, slot] = val
        if cutlass.const_expr(cluster > 1):
            cute.arch.cluster_arrive()  # release: the partials are visible to the peers after the wait
            cute.arch.cluster_wait()
        else:
            cute.arch.sync_threads()
        total = cutlass.const_expr(warps_per_row * cluster)
        acc = cutlass.Float32(init)
        for i in cutlass.range_constexpr(-(-total // 32)):
            idx = lane + i * 32
            if idx < total:
                if cutlass.const_expr(cluster > 1):  # the partial of CTA idx // warps_per_row, through DSMEM
                    ptr = buf.iterator + cute.crd2idx((row, idx % warps_per_row), buf.layout)
                    acc = op(acc, load_peer(ptr, idx // warps_per_row))
                else:
                    acc = op(acc, buf[row, idx])
        val = cute.arch.warp_reduction(acc, op)
    return val


def load_peer(ptr: cute.Pointer, rank) -> cutlass.Float32:
    """The fp32 at `ptr` in the shared memory of the cluster's CTA `rank` (mapa + ld.shared::cluster)."""
    return cute.arch.inline_ptx(
        "{\n.reg .u32 remote;\nmapa.shared::cluster.u32 remote, {$r0}, {$r1};\n"
        "ld.shared::cluster.f32 {$w0}, [remote];\n}",
        write_only_types=[cutlass.Float32], read_only_args=[ptr.toint(), cutlass.Int32(rank)])


def fmax(a, b):
    return cute.arch.fmax(a, b)


def fadd(a, b):
    return a + b


def launch_grid(kernel, tiles, t: Tiling, stream) -> None:
    """`tiles` CTAs (clusters, for wide rows) of t.threads threads each."""
    kernel.launch(grid=[tiles, t.cluster, 1], block=[t.threads, 1, 1],
                  cluster=[1, t.cluster, 1] if t.cluster > 1 else None, stream=stream)


# ---- host side of the engine


def to_cute(t: torch.Tensor, vec: int):
    """(M, N) row-major tensor: M dynamic, N and the row stride static, base aligned to VEC elements."""
    return from_dlpack(t.detach(), assumed_align=min(16, vec * t.element_size())).mark_compact_shape_dynamic(
        mode=0, stride_order=(0, 1))


def _convert(a, vec: int, per_row: bool):
    if per_row:  # one value per row: (M,) with M dynamic
        return from_dlpack(a.detach(), assumed_align=4).mark_layout_dynamic()
    if isinstance(a, torch.Tensor):
        if a.dim() == 1:  # a weight or bias of the row's length: static layout
            return from_dlpack(a.detach(), assumed_align=min(16, vec * a.element_size()))
        return to_cute(a, vec)
    return cutlass.Float32(a)


def _signature(a, per_row: bool) -> tuple:
    if isinstance(a, torch.Tensor):
        return (a.dtype, a.dim(), per_row)
    return (type(a).__name__,)


def stream_of(t: torch.Tensor) -> cuda.CUstream:
    return cuda.CUstream(torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0)


def vector_width(n: int, tensors: list[torch.Tensor]) -> int:
    """Widest vector (16 bytes of the first tensor at most) that divides the row and that every
    tensor's base is aligned to (in its own element size, 16 bytes at most)."""
    vec = 16 // tensors[0].element_size()
    while vec > 1 and (n % vec or any(t.data_ptr() % min(16, vec * t.element_size()) for t in tensors)):
        vec //= 2
    return vec


# Compiled functions keyed on everything they are specialised to (cute.compile does not cache).
_CACHE: dict = {}


def tiling_for(args: list, values: int, per_row: tuple[int, ...] = ()) -> Tiling:
    """The tiling `launch` uses for these arguments (the first (M, N) tensor sets the width)."""
    n = args[0].shape[1]
    tensors = [a for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in per_row]
    return tiling(n, vector_width(n, tensors), values)


def launch(fn, args: list, values: int, *consts, per_row: tuple[int, ...] = (), t: Tiling | None = None) -> None:
    """Run the @cute.jit `fn(*args, stream, tiling, *consts)` on the current stream, compiling it once
    per signature. args: (M, N) tensors (the first sets the tiling), (N,) weights, (M,) tensors of one
    value per row (their positions in `per_row`) and floats; consts: compile-time flags; t: the tiling,
    when the caller sized buffers by it."""
    first = args[0]
    t = t or tiling_for(args, values, per_row)
    cargs = [_convert(a, t.vec, i in per_row) for i, a in enumerate(args)]
    stream = stream_of(first)
    key = (fn.__name__, t, consts, first.device.type, tuple(_signature(a, i in per_row) for i, a in enumerate(args)))
    compiled = _CACHE.get(key)
    if compiled is None:
        compiled = cute.compile(fn, *cargs, stream, t, *consts)
        _CACHE[key] = compiled
    compiled(*cargs, stream)


def rows_2d(t: torch.Tensor) -> torch.Tensor:
    """A contiguous [rows, cols] view (copies when the rows are strided: the layout is compiled in)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.is_contiguous() else t2.contiguous()


# ---- end of the row engine ----------------------------------------------------------------------------


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


def _column_hits(m: cute.Tensor, t: Tiling, tidx, coord, col):
    """True where this thread's element of tile `coord` (shaped as load_tile's) is column `col` of m."""
    tiled = make_tiled_copy(m.element_type, t)
    c = tiled.get_slice(tidx).partition_S(cute.local_tile(cute.make_identity_tensor(m.shape), (t.rows, t.cols),
                                                                 coord))
    hits = cute.make_fragment_like(c, cutlass.Boolean)
    for i in range(cute.size(c)):
        hits[i] = c[i][1] == col
    return hits.load()


def _store_peer(ptr: cute.Pointer, rank, value: cutlass.Float32) -> None:
    """Write `value` at `ptr` in the shared memory of the cluster's CTA `rank` (mapa + st.shared::cluster)."""
    cute.arch.inline_ptx(
        "{\n.reg .u32 remote;\nmapa.shared::cluster.u32 remote, {$r0}, {$r1};\n"
        "st.shared::cluster.f32 [remote], {$r2};\n}",
        read_only_args=[ptr.toint(), cutlass.Int32(rank), value])


@cute.jit
def _merge(m: cutlass.Float32, s: cutlass.Float32, m_all: cutlass.Float32) -> cutlass.Float32:
    """s (a sum of exp(x - m)) rescaled to the max m_all; a group that saw only -inf (s = 0) stays 0."""
    return s * cute.math.exp2((cute.arch.fmax(m, -FLT_MAX) - cute.arch.fmax(m_all, -FLT_MAX)) * LOG2_E,
                              fastmath=True)


@cute.jit
def _row_stats(m: cutlass.Float32, s: cutlass.Float32, sx: cutlass.Float32, part: cute.Tensor, slots: cute.Tensor,
               parity, t: cutlass.Constexpr, SMOOTH: cutlass.Constexpr):
    """(max, sum of exp(x - max), sum of x) over the row from each thread's own: warps by shuffles, the
    CTA through `part` (shared), the cluster by each CTA pushing its triple into every peer's `slots`
    before one cluster barrier. Both buffers alternate with the row's parity: a CTA (or warp) one row
    ahead writes the other half, and cannot be two rows ahead (it waits at the next barrier)."""
    warps = t.threads // 32
    lane, warp = cute.arch.lane_idx(), cute.arch.warp_idx()
    m_w = cute.arch.warp_reduction(m, cute.arch.fmax)
    s_w = cute.arch.warp_reduction(_merge(m, s, m_w), fadd)
    sx_w = cutlass.Float32(0.0)
    if cutlass.const_expr(SMOOTH):
        sx_w = cute.arch.warp_reduction(sx, fadd)
    if lane == 0:
        part[parity, 0, warp] = m_w
        part[parity, 1, warp] = s_w
        part[parity, 2, warp] = sx_w
    cute.arch.sync_threads()
    m_c, s_c, sx_c = cutlass.Float32(-math.inf), cutlass.Float32(0.0), cutlass.Float32(0.0)
    if lane < warps:
        m_c, s_c, sx_c = part[parity, 0, lane], part[parity, 1, lane], part[parity, 2, lane]
    m_all = cute.arch.warp_reduction(m_c, cute.arch.fmax)
    s_all = cute.arch.warp_reduction(_merge(m_c, s_c, m_all), fadd)
    sx_all = sx_c
    if cutlass.const_expr(SMOOTH):
        sx_all = cute.arch.warp_reduction(sx_c, fadd)
    if cutlass.const_expr(t.cluster > 1):
        rank = cute.arch.block_idx()[1]
        if warp == 0:
            if lane < t.cluster:  # lane p pushes this CTA's triple into CTA p's slots
                for v, val in ((0, m_all), (1, s_all), (2, sx_all)):
                    _store_peer(slots.iterator + cute.crd2idx((parity, v, rank), slots.layout), lane, val)
        cute.arch.cluster_arrive()  # release: the pushes are visible to their CTAs after the wait
        cute.arch.cluster_wait()
        m_all = cutlass.Float32(-math.inf)
        for p in cutlass.range_constexpr(t.cluster):
            m_all = cute.arch.fmax(m_all, slots[parity, 0, p])
        s_all, sx_all = cutlass.Float32(0.0), cutlass.Float32(0.0)
        for p in cutlass.range_constexpr(t.cluster):
            s_all += _merge(slots[parity, 0, p], slots[parity, 1, p], m_all)
            sx_all += slots[parity, 2, p]
    return m_all, s_all, sx_all


@cute.kernel
def _ce_rows_kernel(mX: cute.Tensor, mT: cute.Tensor, mW: cute.Tensor, mDen: cute.Tensor, mWsum: cute.Tensor,
                    mLoss: cute.Tensor, mLse: cute.Tensor, mG: cute.Tensor, ignore_index: cutlass.Int64,
                    eps: cutlass.Float32, z: cutlass.Float32, cap: cutlass.Float32, t: cutlass.Constexpr,
                    HAS_WEIGHT: cutlass.Constexpr, SMOOTH: cutlass.Constexpr, HAS_Z: cutlass.Constexpr,
                    HAS_SOFTCAP: cutlass.Constexpr, GRAD: cutlass.Constexpr, REDUCTION: cutlass.Constexpr):
    """Persistent: cluster c walks rows c, c + clusters, ...; each CTA holds its columns of the row in
    registers (the row engine's tiling, one row a CTA) and loads the next row's while it reduces this
    one: one read of the logits, one cluster barrier a row, then with GRAD dlogits for dloss = 1
    written from the registers into mG (which may be mX)."""
    tidx, _, _ = cute.arch.thread_idx()
    first, rank, _ = cute.arch.block_idx()  # rank: this CTA's column tile (its rank in the cluster)
    clusters, _, _ = cute.arch.grid_dim()
    smem = cutlass.memory.SmemAllocator()
    warps = t.threads // 32
    part = smem.allocate_tensor(cutlass.Float32, cute.make_layout((2, 3, warps), stride=(3 * warps, warps, 1)))
    slots = smem.allocate_tensor(cutlass.Float32, cute.make_layout((2, 3, t.cluster),
                                                                   stride=(3 * t.cluster, t.cluster, 1)))
    rows = mX.shape[0]
    tiled, src, pred = _parts(mX, t, tidx, (first, rank), dst=False)
    raw = cute.make_fragment_like(src)
    raw.fill(-math.inf)  # padding columns are never loaded: -inf for good
    cute.copy(tiled, src, raw, pred=pred)
    nxt_t = cute.make_rmem_tensor(cute.make_layout(1), cutlass.Int64)
    nxt_t[0] = cutlass.Int64(mT[first])
    inside = column_mask(mX, t, tidx, (first, rank))
    wsum = cutlass.Float32(t.n)
    if cutlass.const_expr(SMOOTH and HAS_WEIGHT):
        wsum = mWsum[0]
    scale = cutlass.Float32(1.0)
    if cutlass.const_expr(REDUCTION == 2):
        scale = 1.0 / mDen[0]
    w = None
    if cutlass.const_expr(HAS_WEIGHT and SMOOTH):
        w = load_tile(broadcast_rows(mW, mX), t, tidx, (first, rank), 0.0, raw.shape)
    parity = cutlass.Int32(0)
    for row in cutlass.range(first, rows, clusters):
        x = _capped(raw.load().to(cutlass.Float32), cap, HAS_SOFTCAP)
        tgt = nxt_t[0]
        if row + clusters < rows:  # the next row's columns load while this one is reduced
            tiled, src, pred = _parts(mX, t, tidx, (row + clusters, rank), dst=False)
            cute.copy(tiled, src, raw, pred=pred)
            nxt_t[0] = cutlass.Int64(mT[row + clusters])
        if cutlass.const_expr(HAS_SOFTCAP and inside is not None):
            x = cute.where(inside, x, -math.inf)  # the cap maps the padding's -inf to -cap
        kept = tgt != ignore_index and tgt >= 0 and tgt < t.n
        if not kept:
            tgt = cutlass.Int64(0)
        m = x.reduce(cute.ReductionOp.MAX, -math.inf, 0)
        s = cute.math.exp2((x - cute.arch.fmax(m, -FLT_MAX)) * LOG2_E, fastmath=True).reduce(
            cute.ReductionOp.ADD, 0.0, 0)
        sx = cutlass.Float32(0.0)
        if cutlass.const_expr(SMOOTH):
            xs = x if cutlass.const_expr(inside is None) else cute.where(inside, x, 0.0)
            if cutlass.const_expr(HAS_WEIGHT):
                xs = xs * w
            sx = xs.reduce(cute.ReductionOp.ADD, 0.0, 0)
        row_max, total, sx = _row_stats(m, s, sx, part, slots, parity, t, SMOOTH)
        lse = row_max + cute.math.log(total)
        hits = _column_hits(mX, t, tidx, (row, rank), cutlass.Int32(tgt))
        wt = cutlass.Float32(1.0)
        if cutlass.const_expr(HAS_WEIGHT):
            wt = cutlass.Float32(mW[tgt])
        if hits.to(cutlass.Float32).reduce(cute.ReductionOp.ADD, 0.0, 0) > 0.0:  # this thread holds column t
            xt = cute.where(hits, x, 0.0).reduce(cute.ReductionOp.ADD, 0.0, 0)
            loss = wt * (1.0 - eps) * (lse - xt)
            if cutlass.const_expr(SMOOTH):
                loss += eps / t.n * (wsum * lse - sx)
            if cutlass.const_expr(HAS_Z):
                loss += z * lse * lse
            if not kept:
                loss = cutlass.Float32(0.0)
            mLoss[row] = loss
            mLse[row] = lse
        if cutlass.const_expr(GRAD):
            # dx'_c = a p_c - b [c = t] - c_s w_c (formulas in triton.py), times the softcap's derivative
            k = scale
            if not kept:
                k = cutlass.Float32(0.0)
            b = k * wt * (1.0 - eps)
            a = b + k * eps * wsum / t.n
            if cutlass.const_expr(HAS_Z):
                a += k * 2.0 * z * lse
            g = cute.math.exp2((x - lse) * LOG2_E, fastmath=True) * a
            if cutlass.const_expr(SMOOTH):
                if cutlass.const_expr(HAS_WEIGHT):
                    g = g - w * (k * eps / t.n)
                else:
                    g = g - k * eps / t.n
            g = cute.where(hits, g - b, g)
            if cutlass.const_expr(HAS_SOFTCAP):
                g = g * (1.0 - (x / cap) * (x / cap))
            store_tile(mG, t, tidx, (row, rank), g)
        parity = 1 - parity


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
def _launch_rows_in_registers(mX: cute.Tensor, mT: cute.Tensor, mW: cute.Tensor, mDen: cute.Tensor,
                              mWsum: cute.Tensor, mLoss: cute.Tensor, mLse: cute.Tensor, mG: cute.Tensor,
                              ignore_index: cutlass.Int64, eps: cutlass.Float32, z: cutlass.Float32,
                              cap: cutlass.Float32, clusters: cutlass.Int32, stream: cuda.CUstream,
                              t: cutlass.Constexpr, HAS_WEIGHT: cutlass.Constexpr, SMOOTH: cutlass.Constexpr,
                              HAS_Z: cutlass.Constexpr, HAS_SOFTCAP: cutlass.Constexpr, GRAD: cutlass.Constexpr,
                              REDUCTION: cutlass.Constexpr):
    launch_grid(_ce_rows_kernel(mX, mT, mW, mDen, mWsum, mLoss, mLse, mG, ignore_index, eps, z, cap, t, HAS_WEIGHT,
                                SMOOTH, HAS_Z, HAS_SOFTCAP, GRAD, REDUCTION), clusters, t, stream)


@cute.jit
def _launch_scale(mG: cute.Tensor, mDl: cute.Tensor, stream: cuda.CUstream, N: cutlass.Constexpr,
                  VEC: cutlass.Constexpr, PER_ROW: cutlass.Constexpr):
    copy_x, _ = _copies(mG.element_type, mG.element_type, VEC)
    _scale_kernel(mG, mDl, copy_x, N, VEC, PER_ROW).launch(grid=[mG.shape[0], 1, 1], block=[THREADS, 1, 1],
                                                          stream=stream)


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
    args = [_vec_arg(t), _vec_arg(w_arg), _vec_arg(denom), _vec_arg(wsum), cutlass.Int64(ignore_index), stream_of(t)]
    _run("setup", _launch_setup, (t.dtype, t.device.type, n_cols, *flags), args, (n_cols, *flags))
    return denom, wsum


def register_tiling(n_cols: int, vec: int) -> Tiling | None:
    """The row engine's tiling that holds a row of n_cols in registers, REGISTER_VALUES logits a thread,
    one row a CTA (over a cluster of CTAs when wide); None where the row does not fit CTAs of at most
    REGISTER_THREADS threads, or several rows would share a CTA: those rows are streamed (_ce_kernel)."""
    t = tiling(n_cols, vec, REGISTER_VALUES)
    if t.threads <= REGISTER_THREADS and t.vpt * t.vec <= REGISTER_VALUES and t.rows == 1:
        return t
    return None


def _clusters(x: torch.Tensor, t: Tiling) -> int:
    """Clusters of the persistent row kernel: as many as are resident at once (CTAs of REGISTER_THREADS
    threads and their registers: one an SM), never more than there are rows."""
    sms = _sm_count(x.device.index or 0) if x.is_cuda else 132  # CPU: compile-only, any count will do
    per_sm = max(1, REGISTER_THREADS // t.threads)
    return max(1, min(x.shape[0], PERSISTENT_CLUSTERS or sms * per_sm // t.cluster))


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _rows(x, t, w, denom, wsum, loss, lse, dloss, grad, options, mode: int) -> None:
    ignore_index, reduction, eps, z, cap = options
    n_cols = x.shape[1]
    vec = vector_width(n_cols, [x, grad, *([w] if w is not None else [])])
    w_arg = w if w is not None else denom
    flags = (w is not None, eps > 0.0, z > 0.0, cap is not None)
    scalars = [cutlass.Int64(ignore_index), cutlass.Float32(eps), cutlass.Float32(z), cutlass.Float32(cap or 1.0)]
    held = mode != 2 and ROWS_IN_REGISTERS and not (w is not None and eps > 0.0)  # weighted smoothing: spills
    tiles = register_tiling(n_cols, vec) if held else None
    if tiles is not None:  # forward (and the fused gradient): the row read once, held in registers
        args = [_rows_arg(x, vec), _vec_arg(t), _static_arg(w_arg, vec), _vec_arg(denom), _vec_arg(wsum),
                _vec_arg(loss), _vec_arg(lse), _rows_arg(grad, vec), *scalars,
                cutlass.Int32(_clusters(x, tiles)), stream_of(x)]
        static = (tiles, *flags, mode == 1, REDUCTIONS[reduction])
        _run("rows_reg", _launch_rows_in_registers, (x.dtype, t.dtype, x.device.type, *static), args, static)
        return
    args = [_rows_arg(x, vec), _vec_arg(t), _static_arg(w_arg, vec), _vec_arg(denom), _vec_arg(wsum), _vec_arg(loss),
            _vec_arg(lse), _vec_arg(dloss), _rows_arg(grad, vec), *scalars, stream_of(x)]
    static = (n_cols, vec, *flags, mode, REDUCTIONS[reduction])
    _run("rows", _launch_rows, (x.dtype, t.dtype, x.device.type, *static), args, static)


def _reduce(row_loss: torch.Tensor, denom: torch.Tensor, out: torch.Tensor, mean: bool) -> None:
    args = [_vec_arg(row_loss), _vec_arg(denom), _vec_arg(out.view(1)), stream_of(row_loss)]
    _run("reduce", _launch_reduce, (out.dtype, row_loss.device.type, mean), args, (mean,))


def _scale(grad: torch.Tensor, dloss: torch.Tensor) -> None:
    """grad [N, V] *= dloss (0-dim, or [N]) in place."""
    n_cols = grad.shape[1]
    vec = vector_width(n_cols, [grad])
    per_row = dloss.dim() > 0
    dl = dloss.reshape(-1).to(torch.float32).contiguous()
    args = [_rows_arg(grad, vec), _vec_arg(dl), stream_of(grad)]
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
