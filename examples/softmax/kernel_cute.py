"""Row softmax in CuTe DSL: one CTA per row, the row held in registers, fp32 math.

Each thread loads VEC-element vectors through a copy atom (128-bit when the row width and the
pointers allow it), the tail is predicated per vector, and the row max and sum are reduced across
the warp with butterfly shuffles, then across the CTA through shared memory. The row width N is a
compile-time constant and the row count M is dynamic: one compile per (dtype, N, VEC, threads).

Run: `kernelagent verify examples/softmax/kernel_cute.py --ref examples/softmax/op.py`.
"""

import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

MAX_THREADS = 1024
MAX_VALUES_PER_THREAD = 64  # the row lives in registers: 64 fp32 values per thread at most
VECTORS_PER_THREAD = 4  # target; fewer threads for narrow rows, more work per thread for wide ones
LOG2_E = math.log2(math.e)

# Compiled functions, keyed on what the kernel is specialised to. The source, arch and compile
# options are fixed for the life of this module object (a new source is a new module), so the
# key holds only what varies between calls: dtype, N, vector width, threads and device type.
_CACHE: dict = {}


# ----------------------------------------------------------------------------- reductions


@cute.jit
def _block_max(val: cutlass.Float32, buf: cute.Tensor, warps: cutlass.Constexpr) -> cutlass.Float32:
    """Max over the CTA: butterfly within each warp, one slot per warp in shared memory, then
    every warp reduces the slots again so all threads get the result without a broadcast."""
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()  # a warp-wide shuffle: every lane must execute it, never in a branch
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
    """Sum over the CTA, same scheme as `_block_max` (its own buffer, so no second barrier)."""
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


# ----------------------------------------------------------------------------- kernel


@cute.kernel
def _softmax_kernel(
    mX: cute.Tensor,  # (M, N) row-major
    mY: cute.Tensor,  # (M, N) row-major
    tiled_copy: cute.TiledCopy,
    N: cutlass.Constexpr,
    VEC: cutlass.Constexpr,
    THREADS: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    smem = cutlass.memory.SmemAllocator()
    max_buf = smem.allocate_tensor(cutlass.Float32, THREADS // 32)
    sum_buf = smem.allocate_tensor(cutlass.Float32, THREADS // 32)

    thr_copy = tiled_copy.get_slice(tidx)
    tXgX = thr_copy.partition_S(mX[row, None])  # ((VEC,1), rest)
    tYgY = thr_copy.partition_D(mY[row, None])
    tXcX = thr_copy.partition_S(cute.make_identity_tensor(N))  # column of each element
    rest = cute.size(tXgX, mode=[1])

    # One predicate per vector; N % VEC == 0, so a vector is all in or all out.
    pred = cute.make_rmem_tensor((1, rest), cutlass.Boolean)
    for i in cutlass.range_constexpr(rest):
        if cutlass.const_expr((i + 1) * THREADS * VEC <= N):
            pred[0, i] = True
        else:
            pred[0, i] = cute.elem_less(tXcX[0, i], N)

    tXrX = cute.make_fragment_like(tXgX)
    tXrX.fill(-math.inf)  # padding: exp(-inf - max) = 0 and it never wins the max
    cute.copy(tiled_copy, tXgX, tXrX, pred=pred)
    x = tXrX.load().to(cutlass.Float32)

    row_max = _block_max(x.reduce(cute.ReductionOp.MAX, -math.inf, 0), max_buf, THREADS // 32)
    e = cute.math.exp2((x - row_max) * LOG2_E, fastmath=True)
    row_sum = _block_sum(e.reduce(cute.ReductionOp.ADD, 0.0, 0), sum_buf, THREADS // 32)

    tYrY = cute.make_fragment_like(tYgY)
    tYrY.store((e * (1.0 / row_sum)).to(mY.element_type))
    cute.copy(tiled_copy, tYrY, tYgY, pred=pred)


@cute.jit
def _softmax(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    N: cutlass.Constexpr,
    VEC: cutlass.Constexpr,
    THREADS: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(
        cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=mX.element_type.width * VEC
    )
    tiled_copy = cute.make_tiled_copy_tv(atom, cute.make_layout(THREADS), cute.make_layout(VEC))
    _softmax_kernel(mX, mY, tiled_copy, N, VEC, THREADS).launch(
        grid=[mX.shape[0], 1, 1], block=[THREADS, 1, 1], stream=stream
    )


# ----------------------------------------------------------------------------- host side


def _vector_width(n: int, elem_bytes: int, *pointers: int) -> int:
    """Widest vector (16 bytes at most) that divides the row and that every pointer is aligned to."""
    vec = 16 // elem_bytes
    while vec > 1 and (n % vec or any(p % (vec * elem_bytes) for p in pointers)):
        vec //= 2
    return vec


def _thread_count(n_vectors: int) -> int:
    per_thread = -(-n_vectors // VECTORS_PER_THREAD)
    return min(MAX_THREADS, max(32, -(-per_thread // 32) * 32))


def _to_cute(t: torch.Tensor, vec: int):
    """(M, N) row-major tensor with M dynamic, N and the row stride static, base aligned to VEC."""
    return from_dlpack(t, assumed_align=vec * t.element_size()).mark_compact_shape_dynamic(
        mode=0, stride_order=(0, 1)
    )


def _stream(x: torch.Tensor) -> cuda.CUstream:
    return cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0)


def _compiled(x: torch.Tensor, y: torch.Tensor, vec: int, threads: int):
    key = (x.dtype, x.shape[1], vec, threads, x.device.type)
    fn = _CACHE.get(key)
    if fn is None:
        fn = cute.compile(_softmax, _to_cute(x, vec), _to_cute(y, vec), _stream(x), x.shape[1], vec, threads)
        _CACHE[key] = fn
    return fn


class ModelNew(nn.Module):
    """softmax(x, dim=-1) by the CuTe DSL kernel above; output in the input's dtype (fp32 or bf16)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() == 0:
            return torch.empty_like(x)
        n = x.shape[-1]
        x2 = x.reshape(-1, n)
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        y = torch.empty_like(x2)
        vec = _vector_width(n, x2.element_size(), x2.data_ptr(), y.data_ptr())
        threads = _thread_count(n // vec)
        if -(-n // (vec * threads)) * vec > MAX_VALUES_PER_THREAD:
            raise ValueError(f"row width {n} is too wide for this one-CTA-per-row kernel")
        _compiled(x2, y, vec, threads)(_to_cute(x2, vec), _to_cute(y, vec), _stream(x2))
        return y.view(x.shape)
