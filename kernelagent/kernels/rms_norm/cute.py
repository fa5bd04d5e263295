"""RMSNorm (last dimension, optional weight, optional fused residual add) in CuTe DSL, forward and
backward, registered as torch custom ops.

Forward: y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) kept in fp32; with a residual,
s = x + residual is written too (rounded to x's dtype, then normalised). Every row lives in
registers, spread over the threads of a CTA, or over the CTAs of a cluster when it is too wide for
one CTA (rows up to 262144); reductions go lane -> warp -> CTA (shared memory) -> cluster
(st.async pushes into every peer's shared memory, completing its mbarrier), so each element is read
once and written once. Backward: a fixed
grid of CTAs walks the row tiles, writes dx = rstd * (w*dy - xhat * mean(w*dy*xhat)) (+ the sum's
own gradient) and keeps its share of dw = sum(dy * xhat) in fp32 registers; a second kernel sums
the shares column-wise in a fixed order (deterministic, no atomics). Rows must be contiguous
(other inputs are copied first).
Order: tiling -> row engine -> norm backward helpers -> kernels -> launch -> host side -> custom ops.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

# fp32 values a thread holds per tensor: forward one tensor (x), backward two (x and dy).
FWD_VALUES = 32
BWD_VALUES = 16

# ---- row engine: shared by the row-wise cute.py files (softmax, log_softmax, rms_norm, layer_norm) ----
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


@dataclass(frozen=True)
class Spread:
    """How a kernel spreads its rows: about `values` elements a thread, and by row width the limits
    (threads of one CTA on a row before the row goes to a cluster, CTAs a cluster, threads a CTA):
    `by_width` holds (widest row, limits) pairs, the first that fits applies; wider rows, or none given,
    take the module's defaults. Clusters of 16 are non-portable on sm_90 (the H100/H200 run them); a CTA
    of at most 512 threads may hold 128 registers a thread, one of 1024 only 64."""

    values: int
    by_width: tuple[tuple[int, tuple[int, int, int]], ...] = ()

    def limits(self, n: int) -> tuple[int, int, int]:
        for width, limits in self.by_width:
            if n <= width:
                return limits
        return _default_limits()


def _default_limits() -> tuple[int, int, int]:
    return (MAX_CTA_THREADS_PER_ROW, MAX_CLUSTER, MAX_THREADS)


def tiling(n: int, vec: int, values: int, limits: tuple[int, int, int] | None = None) -> Tiling:
    """The tiling of rows of n columns in vectors of vec elements, about `values` per thread, within
    `limits` (Spread.limits; the module's defaults when None)."""
    per_cta, max_cluster, max_threads = limits or _default_limits()
    vectors = -(-n // vec)
    per_thread = max(1, values // vec)
    cluster = 1
    tpr = _pow2_at_least(-(-vectors // per_thread))
    while tpr > per_cta and cluster < max_cluster:
        cluster *= 2
        tpr = _pow2_at_least(-(-vectors // (per_thread * cluster)))
    tpr = min(tpr, max_threads)
    vpt = -(-vectors // (tpr * cluster))
    if vpt * vec > 4 * values:
        raise ValueError(f"rows of {n} columns are too wide for this kernel (at most about "
                         f"{max_threads * max_cluster * values * 4} elements)")
    while cluster > 1 and (cluster - 1) * tpr * vpt >= vectors:  # every CTA of a cluster owns columns
        cluster //= 2
    vpt = -(-vectors // (tpr * cluster))
    if vpt * vec > 4 * values and limits is not None:  # the halved cluster overfills its threads: defaults
        return tiling(n, vec, values)
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


# Row reductions: lane -> warp (butterfly shuffles) -> CTA (shared memory: each warp's partial, one
# barrier) -> cluster. Across a cluster every warp pushes its partial into every CTA's buffer with
# st.async, whose bytes complete that CTA's own transaction-count mbarrier, armed by the CTA for all
# it will receive; one wait, and the CTA reduces its local copy. No cluster barrier in a reduction and
# none at the end: a CTA reads no peer's memory, and it cannot exit while a push to it is in flight
# (it waits for every one). Against the earlier cluster barrier + remote loads, 1.3-1.4x on the
# softmax forward at 32K-256K columns: benchmarks/results/2026-12-03-h200/cluster_reduce.json.


@dataclass
class RowReductions:
    """A kernel's row-reduction buffers, from row_reductions."""

    t: Tiling
    stages: int
    bufs: list  # per reduction, fp32: (ROWS, warps, stages); across a cluster (warps x CTAs, stages)
    mbars: cute.Pointer | None  # across a cluster: one per reduction and stage, reduction-major
    ready: bool  # across a cluster: row_group_ready was called


def row_reductions(smem, t: Tiling, count: int, stages: int = 1) -> RowReductions:
    """Shared memory for a kernel's `count` row reductions, allocated at its start by every thread.
    Each reduction has its own buffer (and mbarrier), used once (stages=1), so no barrier is needed
    after reading it. A kernel that walks tile after tile takes stages=2, step k using copy k % 2: no
    thread, here or in a peer, reaches step k + 2 before every thread has read step k's copies (step
    k + 1's reductions wait for all of them), so a copy is only written again once read. Across a
    cluster, thread 0 initialises the mbarriers and every thread arrives (relaxed) on the cluster
    barrier, which row_group_ready waits on."""
    assert stages in (1, 2), stages
    warps = max(t.tpr // 32, 1)
    if t.cluster == 1:
        layout = cute.make_layout((t.rows, warps, stages), stride=(warps, 1, t.rows * warps))
        return RowReductions(t, stages, [smem.allocate_tensor(cutlass.Float32, layout) for _ in range(count)],
                             None, ready=True)
    assert t.rows == 1 and t.tpr % 32 == 0 and t.cluster <= 32, t  # one row a CTA, whole warps
    mbars = smem.allocate_array(cutlass.Int64, count * stages)
    layout = cute.make_layout((warps * t.cluster, stages))
    bufs = [smem.allocate_tensor(cutlass.Float32, layout) for _ in range(count)]
    _init_mbarriers(mbars, count * stages)
    cute.arch.mbarrier_init_fence()
    cute.arch.cluster_arrive_relaxed()  # the peers must see the mbarriers initialised before pushing
    return RowReductions(t, stages, bufs, mbars, ready=False)


@cute.jit
def _init_mbarriers(mbars: cute.Pointer, n: cutlass.Constexpr) -> None:
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        for i in cutlass.range_constexpr(n):
            cute.arch.mbarrier_init(mbars + i, 1)  # one arrival: the CTA's own, arming the bytes


def row_group_ready(red: RowReductions) -> None:
    """Call once, from every thread, before the first row_reduce and after the first loads are issued
    (the wait overlaps them): across a cluster, waits until every CTA's mbarriers are initialised."""
    if red.t.cluster > 1:
        cute.arch.cluster_wait()
    red.ready = True


def _reduction_at(red: RowReductions, which: int, step):
    """(buffer, copy, mbarrier, phase) of reduction `which` at `step`: copy step % stages; the k-th
    use of an mbarrier waits for its k-th phase, of parity k % 2."""
    if not red.ready:
        raise RuntimeError("row_group_ready must come before the first reduction across a cluster")
    if red.stages == 1 and not (isinstance(step, int) and step == 0):
        raise ValueError("a kernel that reduces tile after tile needs row_reductions(..., stages=2)")
    stage, phase = (0, 0) if red.stages == 1 else (step & 1, (step >> 1) & 1)
    mbar = None if red.mbars is None else red.mbars + (which * red.stages + stage)
    return red.bufs[which], stage, mbar, phase


@cute.jit
def row_reduce(val: cutlass.Float32, op: cutlass.Constexpr, init: cutlass.Constexpr, red: RowReductions,
               which: cutlass.Constexpr, step=0) -> cutlass.Float32:
    """Reduce one value per thread over the threads (and CTAs) of its row with reduction `which` of
    `red`; every thread gets the result. `step`: in a kernel that walks tiles, the loop's iteration
    (0, 1, 2, ..., not the tile's index)."""
    t = red.t
    buf, stage, mbar, phase = _reduction_at(red, which, step)
    if cutlass.const_expr(t.cluster == 1):
        val = cute.arch.warp_reduction(val, op, threads_in_group=min(t.tpr, 32))
        warps_per_row = cutlass.const_expr(max(t.tpr // 32, 1))
        if cutlass.const_expr(warps_per_row > 1):
            lane, warp = cute.arch.lane_idx(), cute.arch.warp_idx()
            row, slot = warp // warps_per_row, warp % warps_per_row
            if lane == 0:
                buf[row, slot, stage] = val
            cute.arch.sync_threads()
            acc = cutlass.Float32(init)
            for i in cutlass.range_constexpr(-(-warps_per_row // 32)):
                idx = lane + i * 32
                if idx < warps_per_row:
                    acc = op(acc, buf[row, idx, stage])
            val = cute.arch.warp_reduction(acc, op)
    else:
        warps = cutlass.const_expr(t.tpr // 32)
        total = cutlass.const_expr(warps * t.cluster)
        lane, warp = cute.arch.lane_idx(), cute.arch.warp_idx()
        rank = cute.arch.block_idx()[1]  # the CTA's column tile: its rank in the cluster
        val = cute.arch.warp_reduction(val, op)
        if warp == 0:
            if lane == 0:  # arm: this step's bytes, from every warp of every CTA (its own included)
                cute.arch.mbarrier_arrive_and_expect_tx(mbar, total * 4)
        if lane < t.cluster:  # lane r pushes the warp's partial into CTA r's slot (this CTA, this warp)
            store_peer_async(buf.iterator + cute.crd2idx((rank * warps + warp, stage), buf.layout), mbar, lane, val)
        done = cute.arch.mbarrier_try_wait(mbar, phase)
        while not done:  # until every push to this CTA has landed
            done = cute.arch.mbarrier_try_wait(mbar, phase)
        acc = cutlass.Float32(init)
        for i in cutlass.range_constexpr(-(-total // 32)):
            idx = lane + i * 32
            if idx < total:
                acc = op(acc, buf[idx, stage])
        val = cute.arch.warp_reduction(acc, op)
    return val


def store_peer_async(dst: cute.Pointer, mbar: cute.Pointer, rank, value: cutlass.Float32) -> None:
    """st.async `value` to `dst` in the shared memory of the cluster's CTA `rank`, completing 4 bytes of
    the transaction count of that CTA's mbarrier at the address of `mbar` (mapa for both)."""
    cute.arch.inline_ptx(
        "{\n.reg .u32 ra, rb;\nmapa.shared::cluster.u32 ra, {$r0}, {$r2};\n"
        "mapa.shared::cluster.u32 rb, {$r1}, {$r2};\n"
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [ra], {$r3}, [rb];\n}",
        read_only_args=[dst.toint(), mbar.toint(), cutlass.Int32(rank), value])


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


def tiling_for(args: list, spread: Spread | int, per_row: tuple[int, ...] = ()) -> Tiling:
    """The tiling `launch` uses for these arguments (the first (M, N) tensor sets the width); `spread` a
    Spread, or the values a thread with the default limits."""
    spread = spread if isinstance(spread, Spread) else Spread(spread)
    n = args[0].shape[1]
    tensors = [a for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in per_row]
    return tiling(n, vector_width(n, tensors), spread.values, spread.limits(n))


def launch(fn, args: list, values: Spread | int, *consts, per_row: tuple[int, ...] = (),
           t: Tiling | None = None) -> None:
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

# How the kernels spread rows wider than one CTA's 512 threads (Spread: up to that width, threads of one CTA on a row,
# CTAs a cluster, threads a CTA), from benchmarks/probes/row_cluster.py on the H200
# (benchmarks/results/2026-12-03-h200/row_cluster.json, 2**27 bf16 elements a width): backward 2.16 -> 2.35 TB/s at
# 32K, 2.04 -> 2.14 at 64K and 0.45 -> 1.79 at 256K (a CTA of 512 threads holds x, dy and the weight's gradient in 128
# registers a thread; 1024 threads spilled at 64); forward the same within 1 % up to 64K, 2.90 -> 2.95 at 256K. Rows
# up to 16K columns keep the portable spread (not measured otherwise).
_PORTABLE = (MAX_CTA_THREADS_PER_ROW, MAX_CLUSTER, MAX_THREADS)  # the engine's defaults: (512, 8, 1024)
FWD_SPREAD = Spread(FWD_VALUES, ((65536, _PORTABLE), (1 << 62, (512, 16, 512))))
BWD_SPREAD = Spread(BWD_VALUES, ((16384, _PORTABLE), (1 << 62, (256, 16, 512))))


# ---- norm backward helpers: shared by rms_norm/cute.py and layer_norm/cute.py ----
BWD_THREADS_PER_SM = 1024  # the persistent backward keeps about this many threads on each SM
COLSUM_THREADS = 256


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def persistent_ctas(x: torch.Tensor, t: Tiling) -> int:
    """CTAs of the persistent backward: enough to fill the GPU, never more than there are row tiles."""
    sms = _sm_count(x.device.index or 0) if x.is_cuda else 132  # CPU: compile-only, any count will do
    per_sm = max(1, BWD_THREADS_PER_SM // t.threads)
    return max(1, min(-(-x.shape[0] // t.rows), sms * per_sm // t.cluster))


def accumulator(m: cute.Tensor, t: Tiling, tidx) -> cute.Tensor:
    """A zeroed fp32 register fragment shaped as this thread's share of a tile of m (as load_tile's)."""
    _, part, _ = _parts(m, t, tidx, (0, 0), dst=False)
    acc = cute.make_fragment_like(part, cutlass.Float32)
    acc.fill(0.0)
    return acc


@cute.jit
def row_scalar(v: cute.Tensor, row: cutlass.Int32, rows: cutlass.Int32) -> cutlass.Float32:
    """v[row] in fp32 (0 past the last row): a per-row statistic saved by the forward."""
    out = cutlass.Float32(0.0)
    if row < rows:
        out = v[row].to(cutlass.Float32)
    return out


@cute.kernel
def _column_sum_kernel(mPart: cute.Tensor, mOut: cute.Tensor):
    # out[c] = sum_p part[p, c], in order p = 0, 1, ... (the same bits on every run)
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    col = bidx * COLSUM_THREADS + tidx
    if col < mOut.shape[0]:
        acc = cutlass.Float32(0.0)
        for p in cutlass.range(mPart.shape[0]):
            acc += mPart[p, col]
        mOut[col] = acc.to(mOut.element_type)


@cute.jit
def _column_sum(mPart: cute.Tensor, mOut: cute.Tensor, stream: cuda.CUstream, t: cutlass.Constexpr):
    _column_sum_kernel(mPart, mOut).launch(grid=[cute.ceil_div(t.n, COLSUM_THREADS), 1, 1],
                                           block=[COLSUM_THREADS, 1, 1], stream=stream)


def column_sum(part: torch.Tensor, out: torch.Tensor) -> None:
    """out = part.sum(0) in out's dtype, by the kernel above."""
    launch(_column_sum, [part, out], BWD_VALUES)


# ---- end of the norm backward helpers ----------------------------------------------------------------


# ----------------------------------------------------------------------------------------- kernels


@cute.kernel
def _rms_fwd_kernel(mX: cute.Tensor, mR: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, mS: cute.Tensor,
                    mRstd: cute.Tensor, eps: cutlass.Float32, t: cutlass.Constexpr, HAS_RES: cutlass.Constexpr,
                    HAS_W: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, rank, _ = cute.arch.block_idx()  # rank: this CTA's column tile (its rank in the cluster)
    red = row_reductions(cutlass.memory.SmemAllocator(), t, 1)  # the sum of squares
    here = (bidx, rank)
    x = load_tile(mX, t, tidx, here, 0.0)  # padding adds nothing to the sum of squares
    if cutlass.const_expr(HAS_RES):
        s = (x + load_tile(mR, t, tidx, here, 0.0, x.shape)).to(mS.element_type)  # rounded as torch's x + r
        store_tile(mS, t, tidx, here, s)
        x = s.to(cutlass.Float32)
    row_group_ready(red)
    sum_sq = row_reduce((x * x).reduce(cute.ReductionOp.ADD, 0.0, 0), fadd, 0.0, red, 0)
    rstd = 1.0 / cute.math.sqrt(sum_sq / t.n + eps)  # correctly rounded sqrt and division
    row = row_of(t, tidx, bidx)
    if tidx % t.tpr == 0:
        if rank == 0:
            if row < mX.shape[0]:
                mRstd[row] = rstd
    y = x * rstd
    if cutlass.const_expr(HAS_W):
        y = y * load_tile(broadcast_rows(mW, mX), t, tidx, here, 0.0, x.shape)
    store_tile(mY, t, tidx, here, y)


@cute.kernel
def _rms_bwd_kernel(mX: cute.Tensor, mW: cute.Tensor, mDY: cute.Tensor, mDR: cute.Tensor, mRstd: cute.Tensor,
                    mDX: cute.Tensor, mPart: cute.Tensor, t: cutlass.Constexpr, HAS_W: cutlass.Constexpr,
                    HAS_DRES: cutlass.Constexpr):
    # xhat = x * rstd;  dx = rstd * (w*dy - xhat * mean(w*dy*xhat)) (+ dres);  dw = sum_rows(dy * xhat)
    tidx, _, _ = cute.arch.thread_idx()
    bidx, rank, _ = cute.arch.block_idx()
    ctas, _, _ = cute.arch.grid_dim()
    red = row_reductions(cutlass.memory.SmemAllocator(), t, 1, stages=2)  # the dot product, per step parity
    rows = mX.shape[0]
    dw = accumulator(mX, t, tidx)  # this CTA's share of dw, fp32, its columns of every row it walks
    w = None
    if cutlass.const_expr(HAS_W):
        w = load_tile(broadcast_rows(mW, mX), t, tidx, (0, rank), 0.0, dw.shape)
    row_group_ready(red)
    for step in cutlass.range(cute.ceil_div(cute.ceil_div(rows, t.rows) - bidx, ctas)):
        tile = bidx + step * ctas
        here = (tile, rank)
        x = load_tile(mX, t, tidx, here, 0.0)
        dy = load_tile(mDY, t, tidx, here, 0.0, x.shape)
        rstd = row_scalar(mRstd, row_of(t, tidx, tile), rows)
        xhat = x * rstd
        wdy = dy * w if cutlass.const_expr(HAS_W) else dy
        c = row_reduce((wdy * xhat).reduce(cute.ReductionOp.ADD, 0.0, 0), fadd, 0.0, red, 0, step)
        dx = (wdy - xhat * (c / t.n)) * rstd
        if cutlass.const_expr(HAS_DRES):
            dx = dx + load_tile(mDR, t, tidx, here, 0.0, x.shape)
        store_tile(mDX, t, tidx, here, dx)
        if cutlass.const_expr(HAS_W):
            dw.store(dw.load() + dy * xhat)
    if cutlass.const_expr(HAS_W):
        store_tile(mPart, t, tidx, (bidx, rank), dw.load())


# ------------------------------------------------------------------------------------------ launch


@cute.jit
def _rms_fwd(mX: cute.Tensor, mR: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, mS: cute.Tensor,
             mRstd: cute.Tensor, eps: cutlass.Float32, stream: cuda.CUstream, t: cutlass.Constexpr,
             HAS_RES: cutlass.Constexpr, HAS_W: cutlass.Constexpr):
    launch_grid(_rms_fwd_kernel(mX, mR, mW, mY, mS, mRstd, eps, t, HAS_RES, HAS_W),
                cute.ceil_div(mX.shape[0], t.rows), t, stream)


@cute.jit
def _rms_bwd(mX: cute.Tensor, mW: cute.Tensor, mDY: cute.Tensor, mDR: cute.Tensor, mRstd: cute.Tensor,
             mDX: cute.Tensor, mPart: cute.Tensor, stream: cuda.CUstream, t: cutlass.Constexpr,
             HAS_W: cutlass.Constexpr, HAS_DRES: cutlass.Constexpr):
    launch_grid(_rms_bwd_kernel(mX, mW, mDY, mDR, mRstd, mDX, mPart, t, HAS_W, HAS_DRES),
                mPart.shape[0] // t.rows, t, stream)


# --------------------------------------------------------------------------------------- host side


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
    """The CuTe forward: (y, rstd, s) with s = x + residual (None without a residual)."""
    _check(x, weight, residual)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    s = torch.empty(x.shape, dtype=x.dtype, device=x.device) if residual is not None else None
    rstd = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    if x.numel():
        n = x.shape[-1]
        x2, y2 = rows_2d(x), y.view(-1, n)
        r2 = rows_2d(residual.to(x.dtype)) if residual is not None else x2
        s2 = s.view(-1, n) if s is not None else y2
        w = weight.contiguous() if weight is not None else x2[0]  # placeholders are never read
        launch(_rms_fwd, [x2, r2, w, y2, s2, rstd.view(-1), float(eps)], FWD_SPREAD, residual is not None,
               weight is not None, per_row=(5,))
    return y, rstd, s


def rms_norm_backward(x: torch.Tensor, weight: torch.Tensor | None, dy: torch.Tensor, rstd: torch.Tensor,
                      dres: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The CuTe backward: (dx + dres, dweight) from the normalised input x (or the sum s) and rstd."""
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    dw = None if weight is None else torch.empty(weight.shape, dtype=weight.dtype, device=weight.device)
    if not x.numel():
        return dx, (dw.zero_() if dw is not None else None)
    n = x.shape[-1]
    x2, dx2 = rows_2d(x), dx.view(-1, n)
    dy2 = rows_2d(dy.to(x.dtype))
    dr2 = rows_2d(dres.to(x.dtype)) if dres is not None else dy2
    w = weight.contiguous() if weight is not None else x2[0]
    t = tiling_for([x2, w, dy2, dr2, dx2], BWD_SPREAD)  # the dw shares: one row per CTA row, all written
    part = torch.empty((persistent_ctas(x2, t) * t.rows, n), dtype=torch.float32, device=x.device)
    launch(_rms_bwd, [x2, w, dy2, dr2, rstd.reshape(-1), dx2, part], BWD_SPREAD, weight is not None,
           dres is not None, per_row=(4,), t=t)
    if dw is not None:
        column_sum(part, dw)
    return dx, dw


# -------------------------------------------------------------------------------------- custom ops
# CPU: plain torch in fp32 (the reference path); CUDA: the kernels above.


def _up(t: torch.Tensor) -> torch.Tensor:
    """The CPU path's working precision: fp32, or fp64 for fp64 inputs."""
    return t.double() if t.dtype == torch.float64 else t.float()


def _stat_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


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
    if x.is_cuda:
        y, rstd, _ = rms_norm_forward(x, weight, eps)
        return y, rstd
    _check(x, weight, cpu=True)
    return _torch_fwd(x, weight, eps)


def _bwd_impl(x: torch.Tensor, weight: torch.Tensor | None, dy: torch.Tensor,
              rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dw = rms_norm_backward(x, weight, dy, rstd) if x.is_cuda else _torch_bwd(x, weight, dy, rstd, None)
    return dx, _no_dw(x, dw)


def _add_fwd_impl(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
                  eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if x.is_cuda:
        y, rstd, s = rms_norm_forward(x, weight, eps, residual)
        return y, s, rstd
    _check(x, weight, residual, cpu=True)
    s = (x + residual.to(x.dtype)).contiguous()
    y, rstd = _torch_fwd(s, weight, eps)
    return y, s, rstd


def _add_bwd_impl(s: torch.Tensor, weight: torch.Tensor | None, dy: torch.Tensor, ds: torch.Tensor,
                  rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dw = rms_norm_backward(s, weight, dy, rstd, ds) if s.is_cuda else _torch_bwd(s, weight, dy, rstd, ds)
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
    dx, dw = torch.ops.kernelagent.cute_rms_norm_bwd(x, weight, dy, rstd)
    return dx, (dw if weight is not None else None), None


def _add_setup(ctx, inputs, output) -> None:
    _, residual, weight, _ = inputs
    ctx.residual_dtype = residual.dtype
    ctx.save_for_backward(output[1], weight, output[2])


def _add_backward(ctx, dy, ds, _drstd):
    s, weight, rstd = ctx.saved_tensors
    if ds is None:  # the sum output was not used
        dx, dw = torch.ops.kernelagent.cute_rms_norm_bwd(s, weight, dy, rstd)
    else:
        dx, dw = torch.ops.kernelagent.cute_rms_norm_add_bwd(s, weight, dy, ds, rstd)
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


cute_rms_norm_fwd = _register("cute_rms_norm_fwd", _fwd_impl, _fwd_fake, _backward, _setup)
cute_rms_norm_bwd = _register("cute_rms_norm_bwd", _bwd_impl, _bwd_fake)
cute_rms_norm_add_fwd = _register("cute_rms_norm_add_fwd", _add_fwd_impl, _add_fwd_fake, _add_backward, _add_setup)
cute_rms_norm_add_bwd = _register("cute_rms_norm_add_bwd", _add_bwd_impl, _add_bwd_fake)


# -------------------------------------------------------------------------------------- public API


def _default_eps(x: torch.Tensor, eps: float | None) -> float:
    """torch's default for eps=None: the machine epsilon of the type it computes in (fp32 for half types)."""
    if eps is not None:
        return float(eps)
    return float(torch.finfo(torch.float64 if x.dtype == torch.float64 else torch.float32).eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None) -> torch.Tensor:
    """RMSNorm over the last dimension by the CuTe kernels, differentiable in x and weight."""
    y, _ = torch.ops.kernelagent.cute_rms_norm_fwd(x, weight, _default_eps(x, eps))
    return y


def rms_norm_add(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None,
                 eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + residual, weight, eps), x + residual) in one pass by the CuTe kernels."""
    y, s, _ = torch.ops.kernelagent.cute_rms_norm_add_fwd(x, residual, weight, _default_eps(x, eps))
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
