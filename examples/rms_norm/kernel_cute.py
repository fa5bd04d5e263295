"""RMSNorm in CuTe DSL: one CTA per row, the row held in registers, fp32 math.

y = x / sqrt(mean(x**2) + eps) * weight, rounded once to the input's dtype. Each thread loads
VEC-element vectors through copy atoms (128-bit when the row width and the pointers allow it), the
tail is predicated per vector, and the sum of squares is reduced across the warp with butterfly
shuffles, then across the CTA through shared memory. The row width N is a compile-time constant
and the row count M is dynamic: one compile per (dtypes, N, VEC, threads).

Run: `kernelagent verify examples/rms_norm/kernel_cute.py --ref examples/rms_norm/op.py`.
"""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

MAX_THREADS = 1024
MAX_VALUES_PER_THREAD = 64  # the row lives in registers: 64 fp32 values per thread at most
VECTORS_PER_THREAD = 4  # target; fewer threads for narrow rows, more work per thread for wide ones
DTYPE = torch.bfloat16  # the reference's parameter dtype (examples/rms_norm/op.py)

# Compiled functions, keyed on what the kernel is specialised to. The source, arch and compile
# options are fixed for the life of this module object (a new source is a new module), so the
# key holds only what varies between calls: dtypes, N, vector width, threads and device type.
_CACHE: dict = {}


# ----------------------------------------------------------------------------- helpers


@cute.jit
def _block_sum(val: cutlass.Float32, buf: cute.Tensor, warps: cutlass.Constexpr) -> cutlass.Float32:
    """Sum over the CTA: butterfly within each warp, one slot per warp in shared memory, then
    every warp reduces the slots again so all threads get the result without a broadcast."""
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()  # a warp-wide shuffle: every lane must execute it, never in a branch
    val = cute.arch.warp_reduction(val, lambda a, b: a + b)
    if lane == 0:
        buf[warp] = val
    cute.arch.sync_threads()
    out = cutlass.Float32(0.0)
    if lane < warps:
        out = buf[lane]
    return cute.arch.warp_reduction(out, lambda a, b: a + b)


def _vector_predicate(tCoord: cute.Tensor, n: int, tile: int) -> cute.Tensor:
    """One predicate per copy-atom vector of a thread's partition ((atom, atom_reps), rest):
    true where the vector starts inside the row. N % VEC == 0, so a vector is all in or all out;
    whole tiles that fit are constant-true so the compiler drops their checks. A plain (not
    @cute.jit) helper: its Python loops and ifs run once, at trace time."""
    reps, rest = cute.size(tCoord, mode=[0, 1]), cute.size(tCoord, mode=[1])
    pred = cute.make_rmem_tensor((reps, rest), cutlass.Boolean)
    for i in range(rest):
        for j in range(reps):
            if (i + 1) * tile <= n:
                pred[j, i] = True
            else:
                pred[j, i] = cute.elem_less(tCoord[(0, j), i], n)
    return pred


# ----------------------------------------------------------------------------- kernel


@cute.kernel
def _rms_norm_kernel(
    mX: cute.Tensor,  # (M, N) row-major
    mW: cute.Tensor,  # (N,)
    mY: cute.Tensor,  # (M, N) row-major
    eps: cutlass.Float32,
    copy_x: cute.TiledCopy,
    copy_w: cute.TiledCopy,
    N: cutlass.Constexpr,
    VEC: cutlass.Constexpr,
    THREADS: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    smem = cutlass.memory.SmemAllocator()
    sum_buf = smem.allocate_tensor(cutlass.Float32, THREADS // 32)
    columns = cute.make_identity_tensor(N)

    thr_x = copy_x.get_slice(tidx)
    tXgX = thr_x.partition_S(mX[row, None])  # ((VEC,1), rest)
    tYgY = thr_x.partition_D(mY[row, None])
    pred_x = _vector_predicate(thr_x.partition_S(columns), N, THREADS * VEC)
    tXrX = cute.make_fragment_like(tXgX)
    tXrX.fill(0)  # padding adds nothing to the sum of squares
    cute.copy(copy_x, tXgX, tXrX, pred=pred_x)

    # The weight is read by every row; issue its load before the reduction so it overlaps.
    thr_w = copy_w.get_slice(tidx)
    tWgW = thr_w.partition_S(mW)  # ((atom, reps), rest): same element order as x
    tWrW = cute.make_fragment_like(tWgW)
    tWrW.fill(0)
    cute.copy(copy_w, tWgW, tWrW, pred=_vector_predicate(thr_w.partition_S(columns), N, THREADS * VEC))

    x = tXrX.load().to(cutlass.Float32)
    sum_sq = _block_sum((x * x).reduce(cute.ReductionOp.ADD, 0.0, 0), sum_buf, THREADS // 32)
    rstd = 1.0 / cute.math.sqrt(sum_sq / N + eps)  # correctly rounded sqrt and division
    w = tWrW.load().to(cutlass.Float32)

    tYrY = cute.make_fragment_like(tYgY)
    tYrY.store(((x * rstd) * w).to(mY.element_type))
    cute.copy(copy_x, tYrY, tYgY, pred=pred_x)


@cute.jit
def _rms_norm(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mY: cute.Tensor,
    eps: cutlass.Float32,
    stream: cuda.CUstream,
    N: cutlass.Constexpr,
    VEC: cutlass.Constexpr,
    THREADS: cutlass.Constexpr,
):
    threads, values = cute.make_layout(THREADS), cute.make_layout(VEC)
    atom_x = cute.make_copy_atom(
        cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=mX.element_type.width * VEC
    )
    # A weight wider than x (fp32 weight, bf16 x) takes several 128-bit atoms per VEC values.
    atom_w = cute.make_copy_atom(
        cute.nvgpu.CopyUniversalOp(),
        mW.element_type,
        num_bits_per_copy=min(128, mW.element_type.width * VEC),
    )
    copy_x = cute.make_tiled_copy_tv(atom_x, threads, values)
    copy_w = cute.make_tiled_copy_tv(atom_w, threads, values)
    _rms_norm_kernel(mX, mW, mY, eps, copy_x, copy_w, N, VEC, THREADS).launch(
        grid=[mX.shape[0], 1, 1], block=[THREADS, 1, 1], stream=stream
    )


# ----------------------------------------------------------------------------- host side


def _vector_width(n: int, elem_bytes: int, pointers: tuple[int, ...], w_bytes: int, w_ptr: int) -> int:
    """Widest vector (16 bytes of x at most) that divides the row and that every pointer is
    aligned to (x and y in x's element size, the weight in its own)."""
    vec = 16 // elem_bytes
    while vec > 1 and (
        n % vec or any(p % (vec * elem_bytes) for p in pointers) or w_ptr % min(16, vec * w_bytes)
    ):
        vec //= 2
    return vec


def _thread_count(n_vectors: int) -> int:
    per_thread = -(-n_vectors // VECTORS_PER_THREAD)
    return min(MAX_THREADS, max(32, -(-per_thread // 32) * 32))


def _align(t: torch.Tensor, vec: int) -> int:
    return min(16, vec * t.element_size())


def _rows(t: torch.Tensor, vec: int):
    """(M, N) row-major tensor with M dynamic, N and the row stride static, base aligned to VEC."""
    return from_dlpack(t, assumed_align=_align(t, vec)).mark_compact_shape_dynamic(
        mode=0, stride_order=(0, 1)
    )


def _stream(x: torch.Tensor) -> cuda.CUstream:
    return cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0)


def _compiled(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, eps: float, vec: int, threads: int):
    key = (x.dtype, w.dtype, x.shape[1], vec, threads, x.device.type)
    fn = _CACHE.get(key)
    if fn is None:
        fn = cute.compile(
            _rms_norm,
            _rows(x, vec),
            from_dlpack(w, assumed_align=_align(w, vec)),
            _rows(y, vec),
            cutlass.Float32(eps),
            _stream(x),
            x.shape[1],
            vec,
            threads,
        )
        _CACHE[key] = fn
    return fn


class ModelNew(nn.Module):
    """RMSNorm with the reference's `weight` parameter and `eps`, computed by the kernel above."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size, dtype=DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() == 0:
            return torch.empty_like(x)
        n = x.shape[-1]
        w = self.weight.detach()  # DLPack refuses tensors that require grad; detach is a view
        if not w.is_contiguous():
            w = w.contiguous()
        x2 = x.reshape(-1, n)
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        y = torch.empty_like(x2)
        vec = _vector_width(n, x2.element_size(), (x2.data_ptr(), y.data_ptr()), w.element_size(), w.data_ptr())
        threads = _thread_count(n // vec)
        if -(-n // (vec * threads)) * vec > MAX_VALUES_PER_THREAD:
            raise ValueError(f"row width {n} is too wide for this one-CTA-per-row kernel")
        fn = _compiled(x2, w, y, self.eps, vec, threads)
        fn(_rows(x2, vec), from_dlpack(w, assumed_align=_align(w, vec)), _rows(y, vec),
           cutlass.Float32(self.eps), _stream(x2))
        return y.view(x.shape)
