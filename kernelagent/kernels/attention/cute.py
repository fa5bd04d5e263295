"""Flash attention forward and backward in CuTe DSL for Hopper (sm_90a); (B, S, H, D).

Forward: one CTA per (128-query block, head, batch) with three warpgroups. Warpgroup 0 is the
producer (registers given away with setmaxnreg): one warp streams Q once and then K and V tiles
through TMA into a multi-stage shared-memory ring, mbarrier pipelines in between. Warpgroups 1 and
2 each own 64 query rows: S = Q K^T by wgmma from shared memory, the online softmax on the fp32
accumulator in registers (log2 domain, exp2, row max and sum across the four threads of a quad),
P converted in registers to the A operand of O += P V (wgmma with A from registers, V^T read
from shared memory). With `overlap` (the default) the QK^T of the next key block and the PV of
the current one are issued back to back and the softmax runs while the PV is in flight (FA3's
intra-warpgroup overlap); the two math warpgroups take turns issuing their GEMMs through named
barriers (ping-pong), so one's softmax hides under the other's tensor-core work. Key blocks are
visited from the last one down: the blocks cut by the causal diagonal / right window edge / key
length first (masked), then the interior (no mask), then those cut by a left window edge. The
epilogue writes O / rowsum and the log-sum-exp straight from registers.

Backward (default, FUSED_BACKWARD): one fused CuTe kernel, FA3's five GEMMs a step. One CTA per (128 keys,
kv head, batch) keeps K, V and the dK, dV accumulators on chip while Q and dO blocks of every query head of the
group stream past (keys on rows: S^T = K Q^T, dP^T = V dO^T from shared memory, dV += P^T dO and dK += dS^T Q
with register operands); dQ's part of a step is a wgmma from dS^T in shared memory (at d128 each math warpgroup
takes half the head dim over all 128 keys, at d64 its own 64 keys over the whole head dim: _fused_tiles),
added across key blocks in fp32 by bulk reductions into a global accumulator, then a Triton post-pass
centres (the rounding's sum taken out around each row's centre key: the last with P within a factor 2 of the
row's largest), scales and rounds it. The split
backward (no atomics, deterministic: with a softcap, or when torch's deterministic algorithms are on): a dK/dV
kernel as above and a dQ kernel, one CTA per (128 queries, head, batch) as the forward with K and V streaming
past; both read one table of the forward's statistics and delta (a small Triton kernel builds it, rows padded
to whole blocks). The Triton backward (the block between the "shared backward" markers, kept identical in
triton.py and checked by a test) serves the CPU interpreter and stays for comparison (CUTE_BACKWARD).
Varlen batches are Triton-only (triton.py).

Head dims 64 and 128, fp16/bf16, GQA/MQA, causal (bottom-right aligned), sliding windows, softcap,
any lengths. One compile per (dtype, head dim, mask kind, softcap, tiles, and for the forward and the fused
backward whether their inputs are row-major: then passed as base pointers and sizes, else as DLPack tensors):
shapes are dynamic.
Order: shared backward block -> CuTe helpers -> forward kernel class -> backward kernel classes (dK/dV,
fused, dQ) -> host launcher -> custom ops -> public API -> ModelNew.
"""

from __future__ import annotations

import functools

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
import torch
import torch.nn as nn
import triton
import triton.language as tl
from cutlass import Float32, Int32, const_expr
from cutlass._mlir.dialects import llvm
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import from_dlpack, make_ptr
from cutlass.cutlass_dsl import dsl_user_op
from cutlass.utils import LayoutEnum

# ==== shared backward: kept identical in triton.py and cute.py (tests/kernels/test_attention_cute.py) ====
# (constants, the backward kernels and their launcher, and the CPU implementation of the ops)
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
_LOG2E_C = tl.constexpr(LOG2E)  # the kernels' copies (globals read in @jit code must be constexpr)
_LN2_C = tl.constexpr(LN2)

# Two kernels, settings found by benchmarks/probes/attention_bwd.py on the H200 (head dim 128, bf16,
# S = 8192): dK/dV with keys on rows (64x64 with 4 warps, 4.0 ms; 64x128 with 8 warps 5.0 ms) and dQ
# with queries on rows, as the forward. One kernel with dQ added atomically took 9.4 ms at its best
# tile, 7.6 ms without the dS rounding correction (its cross-warp row sum every step).
# (BLOCK_M, BLOCK_N, warps, stages, widest head dim). Compiled for sm_90a (tests/kernels/
# test_attention.py): no spill at head dim 128 but up to 72 bytes in dK/dV's causal branch; at 256
# dQ's causal branch spills 8 bytes. dQ tiles 128 keys wide (7.4 and 8.2 ms in that probe) spill, 40-56 bytes
# at 8 warps and 2 stages with the centre of today, and are left out. dQ's 128x64 tile with 4 stages (no spill,
# 243 registers, 193 KiB of shared memory) joined the list on 2026-12-05.
BWD_TABLE = ((64, 64, 4, 2, 128), (64, 128, 8, 2, 128), (16, 64, 8, 2, 256), (32, 64, 8, 2, 256))
DQ_TABLE = ((128, 64, 8, 2, 128), (128, 64, 8, 3, 128), (128, 64, 8, 4, 128), (64, 64, 4, 2, 128),
            (64, 64, 8, 2, 256))
# Triton 3.6's Hopper warp specialisation of both loops (TMA loads only, every block masked) was tried on
# 2026-12-05 and dropped: never faster than these tiles, and a dK/dV variant gave NaN (benchmarks/results/
# 2026-12-05-h200/attention_bwd_ws.json).


def _configs(table) -> list[triton.Config]:
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "MAX_D": d}, num_warps=w, num_stages=s)
            for bm, bn, w, s, d in table]


def _prune(configs, named_args, **kwargs):
    """Keep the configs whose register budget covers this head dim."""
    d = kwargs["BLOCK_D"] if "BLOCK_D" in kwargs else named_args["BLOCK_D"]
    keep = [c for c in configs if d <= c.kwargs["MAX_D"]]
    return keep or configs[-1:]


# the CPU interpreter: one fixed small tile (autotuning needs a GPU)
INTERP_BWD = {"BLOCK_M": 16, "BLOCK_N": 16, "MAX_D": 256}
# Problems below TUNE_MIN (Sq * Sk) skip autotuning and take these (compiling every config costs
# more than such a problem runs); head dim -> (BLOCK_M, BLOCK_N, warps, stages).
TUNE_MIN = 1 << 20
BWD_DEFAULT = {64: (64, 64, 4, 2), 128: (64, 64, 4, 2), 256: (16, 64, 8, 2)}
DQ_DEFAULT = {64: (64, 64, 4, 2), 128: (64, 64, 4, 2), 256: (64, 64, 4, 2)}


def _tuning_bench(kernel_call, quantiles):
    """The autotuner's timer: CUDA events around 12 calls after 3 warm-ups, in plain Python. Shorter
    than triton's do_bench (tuned problems run for 50 us and more), and free of torch ops (do_bench
    takes a torch.quantile): autotuning runs inside the first forward, whose aten calls the verifier
    records."""
    for _ in range(3):
        kernel_call()
    times = []
    for _ in range(12):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kernel_call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return [times[int(q * (len(times) - 1))] for q in quantiles]


def _fixed(table: dict, d: int, **extra) -> dict:
    """Launch settings of the untuned path for head dim d (the smallest table entry covering it)."""
    bm, bn, warps, stages = table[min(k for k in table if k >= d)]
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages, MAX_D=256, **extra)
PRE_BLOCK = 64  # rows per program of the delta preprocess


class AttentionError(ValueError):
    """Inputs the attention kernels cannot take (shapes, dtypes, options)."""


@triton.jit
def _tanh(x):
    # 1 - 2 / (exp(2x) + 1) through exp2 (no libdevice: the CPU interpreter runs it too)
    return 1.0 - 2.0 / (tl.math.exp2(x * 2.8853900817779268) + 1.0)


@triton.jit
def _seq_span(cu_ptr, b, seqlen, VARLEN: tl.constexpr):
    """(first row, length) of sequence b: packed (cu_seqlens) or one per batch entry."""
    if VARLEN:
        start = tl.load(cu_ptr + b)
        length = tl.load(cu_ptr + b + 1) - start
    else:
        start = b * 0
        length = seqlen
    return start, length


@triton.jit
def _key_blocks(m0, sq, sk, win_left, win_right, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(off, n_lo, f_lo, f_hi, n_hi) for the query block at m0: the key blocks [n_lo, n_hi) it reaches, of
    which [f_lo, f_hi) every one of its queries sees whole (no mask); off = sk - sq aligns the causal
    diagonal and the window bottom-right. Shared by the forward and the dQ kernel."""
    off = sk - sq
    m1 = tl.minimum(m0 + BLOCK_M, sq)
    lo = 0
    hi = sk
    f_lo = 0
    f_hi = sk // BLOCK_N
    if HAS_LEFT:
        lo = tl.maximum(m0 + off - win_left, 0)
        f_lo = tl.cdiv(tl.maximum(m1 - 1 + off - win_left, 0), BLOCK_N)
    if HAS_RIGHT:
        hi = tl.minimum(m1 + off + win_right, sk)
        f_hi = tl.minimum(f_hi, tl.maximum(m0 + off + win_right + 1, 0) // BLOCK_N)
    n_lo = lo // BLOCK_N
    n_hi = tl.maximum(tl.cdiv(tl.maximum(hi, 0), BLOCK_N), n_lo)
    f_lo = tl.minimum(tl.maximum(f_lo, n_lo), n_hi)
    f_hi = tl.minimum(tl.maximum(f_hi, f_lo), n_hi)
    return off, n_lo, f_lo, f_hi, n_hi


@triton.jit
def _bwd_preprocess_kernel(Out, DO, DLSE, DELTA, CU_Q, so_b, so_s, so_h, sd_b, sd_s, sd_h, sl_b, sl_h,
                           seqlen_q, n_heads, HEAD_D: tl.constexpr, BLOCK_D: tl.constexpr, VARLEN: tl.constexpr,
                           HAS_DLSE: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta = rowsum(dO * O) - dlse (fp32), laid out like the log-sum-exp."""
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    q_start, sq = _seq_span(CU_Q, b, seqlen_q, VARLEN)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    b64 = b.to(tl.int64)
    r64 = (q_start + rows).to(tl.int64)[:, None]
    mask = (rows[:, None] < sq) & (cols[None, :] < HEAD_D)
    o = tl.load(Out + b64 * so_b + h * so_h + r64 * so_s + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + b64 * sd_b + h * sd_h + r64 * sd_s + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    delta = tl.sum(o * do, 1)
    at = b64 * sl_b + h * sl_h + q_start + rows
    if HAS_DLSE:
        delta -= tl.load(DLSE + at, mask=rows < sq, other=0.0)
    tl.store(DELTA + at, delta, mask=rows < sq)


@triton.jit
def _dkdv_head(dk, dv, k, v, Q, DO, STATS, st_plane, DELTA, q_desc, do_desc, sq_s, sd_s, l_base, start, end, f_lo,
               f_hi, n0, sq, off, qk_scale, cap_scale, cap_log2, win_left, win_right,
               HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr, TMA: tl.constexpr,
               UPCAST: tl.constexpr, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_D: tl.constexpr):
    """dK, dV of one key block over query blocks [start, end) of one head. Blocks outside
    [f_lo, f_hi) straddle a mask edge and are masked (one loop with a uniform branch: three
    specialised loops cost registers the accumulators need). Works transposed (keys on rows):
    sT = K Q^T, so dV += P^T dO and dK += dS^T Q need no transposed accumulators. Rows past the
    sequence read Q = dO = 0 and a log-sum of +inf: P = 0 there; keys past it have K = V = 0 and
    their dK, dV rows are not stored.
    P = exp2((s - m) * qk_scale - log2 l) from the forward's raw row max m and log2 row sum l kept
    apart (STATS): s - m is exact where s - lse, rounded in fp32 at scores of 1e4, costs P a few 1e-3."""
    dtype = Q.dtype.element_ty
    cols = n0 + tl.arange(0, BLOCK_N)
    cols_d = tl.arange(0, BLOCK_D)
    for m_blk in tl.range(start, end, disable_licm=True):  # hoisted full-tile masks would spill
        m0 = m_blk * BLOCK_M
        rows = m0 + tl.arange(0, BLOCK_M)
        row_ok = rows < sq
        if TMA:
            q = q_desc.load([m0, 0])
            do = do_desc.load([m0, 0])
        else:
            mask = row_ok[:, None] & (cols_d[None, :] < HEAD_D)
            q = tl.load(Q + rows[:, None].to(tl.int64) * sq_s + cols_d[None, :], mask=mask, other=0.0)
            do = tl.load(DO + rows[:, None].to(tl.int64) * sd_s + cols_d[None, :], mask=mask, other=0.0)
        m2 = tl.load(STATS + l_base + rows, mask=row_ok, other=0.0)
        l2 = tl.load(STATS + st_plane + l_base + rows, mask=row_ok, other=float("inf"))
        delta = tl.load(DELTA + l_base + rows, mask=row_ok, other=0.0)
        if UPCAST:
            q = q.to(tl.float32)
            do = do.to(tl.float32)
        if UPCAST:  # the forward's product q k^T on the same tiles, transposed after: its scores bit for bit
            qk_t = tl.trans(tl.dot(q, tl.trans(k), input_precision="ieee"))  # [BLOCK_N, BLOCK_M]
        else:
            qk_t = tl.dot(k, tl.trans(q))
        if SOFTCAP:
            t = _tanh(qk_t * cap_scale)
            p_t = tl.math.exp2((cap_log2 * t - m2[None, :]) - l2[None, :])
        else:
            p_t = tl.math.exp2((qk_t - m2[None, :]) * qk_scale - l2[None, :])
        if HAS_LEFT or HAS_RIGHT:
            if (m_blk < f_lo) | (m_blk >= f_hi):
                rel = cols[:, None] - rows[None, :]  # key minus query index
                if HAS_RIGHT:
                    p_t = tl.where(rel <= off + win_right, p_t, 0.0)
                if HAS_LEFT:
                    p_t = tl.where(rel >= off - win_left, p_t, 0.0)
        if UPCAST:
            p_lo = p_t.to(dtype).to(tl.float32)
        else:
            p_lo = p_t.to(dtype)
        dv = tl.dot(p_lo, do, dv)
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = p_t * (dp_t - delta[None, :])
        if SOFTCAP:
            ds_t = ds_t * (1.0 - t * t)
        if UPCAST:
            ds_lo = ds_t.to(dtype).to(tl.float32)
        else:
            ds_lo = ds_t.to(dtype)
        dk = tl.dot(ds_lo, q, dk)
    return dk, dv


@triton.jit
def _attn_dkdv_kernel(Q, K, V, DO, STATS, DELTA, DK, DV, CU_Q, CU_K,
                      sq_b, sq_s, sq_h, sk_b, sk_s, sk_h, sv_b, sv_s, sv_h, sd_b, sd_s, sd_h,
                      sdk_b, sdk_s, sdk_h, sdv_b, sdv_s, sdv_h, sl_b, sl_h, st_plane,
                      seqlen_q, seqlen_k, n_heads_k, group, sm_scale, qk_scale, cap_scale, cap_log2, win_left,
                      win_right, BUCKET_Q, BUCKET_K,
                      HEAD_D: tl.constexpr, BLOCK_D: tl.constexpr, VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr,
                      HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr, TMA: tl.constexpr, UPCAST: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MAX_D: tl.constexpr):
    """One program per (key block, batch x kv head): K, V and the dK, dV accumulators stay on chip
    while the query blocks of every query head of the group stream past (GQA without atomics)."""
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // n_heads_k
    hk = bh % n_heads_k
    q_start, sq = _seq_span(CU_Q, b, seqlen_q, VARLEN)
    k_start, sk = _seq_span(CU_K, b, seqlen_k, VARLEN)
    n0 = pid_n * BLOCK_N
    if n0 < sk:
        dtype = K.dtype.element_ty
        b64 = b.to(tl.int64)
        ks64 = k_start.to(tl.int64)
        qs64 = q_start.to(tl.int64)
        cols = n0 + tl.arange(0, BLOCK_N)
        cols_d = tl.arange(0, BLOCK_D)
        kv_mask = (cols[:, None] < sk) & (cols_d[None, :] < HEAD_D)
        k_base = K + b64 * sk_b + ks64 * sk_s + hk * sk_h
        v_base = V + b64 * sv_b + ks64 * sv_s + hk * sv_h
        if TMA:
            k = tl.make_tensor_descriptor(k_base, [sk, HEAD_D], [sk_s, 1], [BLOCK_N, BLOCK_D]).load([n0, 0])
            v = tl.make_tensor_descriptor(v_base, [sk, HEAD_D], [sv_s, 1], [BLOCK_N, BLOCK_D]).load([n0, 0])
        else:
            k = tl.load(k_base + cols[:, None].to(tl.int64) * sk_s + cols_d[None, :], mask=kv_mask, other=0.0)
            v = tl.load(v_base + cols[:, None].to(tl.int64) * sv_s + cols_d[None, :], mask=kv_mask, other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)

        # query blocks [m_lo, m_hi); those outside [f_lo, f_hi) straddle a mask edge
        off = sk - sq
        n1 = tl.minimum(n0 + BLOCK_N, sk)
        lo = 0
        hi = sq
        f_lo = 0
        f_hi = tl.cdiv(sq, BLOCK_M)
        if HAS_RIGHT:  # query i reaches key j when j <= i + off + right
            lo = tl.maximum(n0 - off - win_right, 0)
            f_lo = tl.cdiv(tl.maximum(n0 + BLOCK_N - 1 - off - win_right, 0), BLOCK_M)
        if HAS_LEFT:  # ... and j >= i + off - left
            hi = tl.minimum(n1 - off + win_left, sq)
            f_hi = tl.minimum(f_hi, tl.maximum(n0 - off + win_left + 1, 0) // BLOCK_M)
        m_lo = lo // BLOCK_M
        m_hi = tl.maximum(tl.cdiv(tl.maximum(hi, 0), BLOCK_M), m_lo)
        f_lo = tl.minimum(tl.maximum(f_lo, m_lo), m_hi)
        f_hi = tl.minimum(tl.maximum(f_hi, f_lo), m_hi)

        dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        for g in range(0, group):
            h = hk * group + g
            q_base = Q + b64 * sq_b + qs64 * sq_s + h * sq_h
            do_base = DO + b64 * sd_b + qs64 * sd_s + h * sd_h
            l_base = b64 * sl_b + h * sl_h + q_start
            q_desc = 0
            do_desc = 0
            if TMA:
                q_desc = tl.make_tensor_descriptor(q_base, [sq, HEAD_D], [sq_s, 1], [BLOCK_M, BLOCK_D])
                do_desc = tl.make_tensor_descriptor(do_base, [sq, HEAD_D], [sd_s, 1], [BLOCK_M, BLOCK_D])
            dk, dv = _dkdv_head(dk, dv, k, v, q_base, do_base, STATS, st_plane, DELTA, q_desc, do_desc, sq_s, sd_s,
                                l_base, m_lo, m_hi, f_lo, f_hi, n0, sq, off, qk_scale, cap_scale, cap_log2, win_left,
                                win_right, HAS_LEFT, HAS_RIGHT, SOFTCAP, TMA, UPCAST, HEAD_D, BLOCK_M, BLOCK_N,
                                BLOCK_D)
        dk = dk * sm_scale
        dk_base = DK + b64 * sdk_b + ks64 * sdk_s + hk * sdk_h
        dv_base = DV + b64 * sdv_b + ks64 * sdv_s + hk * sdv_h
        if TMA:
            dk_desc = tl.make_tensor_descriptor(dk_base, [sk, HEAD_D], [sdk_s, 1], [BLOCK_N, BLOCK_D])
            dv_desc = tl.make_tensor_descriptor(dv_base, [sk, HEAD_D], [sdv_s, 1], [BLOCK_N, BLOCK_D])
            dk_desc.store([n0, 0], dk.to(dtype))
            dv_desc.store([n0, 0], dv.to(dtype))
        else:
            tl.store(dk_base + cols[:, None].to(tl.int64) * sdk_s + cols_d[None, :], dk.to(dtype), mask=kv_mask)
            tl.store(dv_base + cols[:, None].to(tl.int64) * sdv_s + cols_d[None, :], dv.to(dtype), mask=kv_mask)


@triton.jit
def _dq_phase(dq, rs, idx, q, do, m2, l2, p_half, delta, k_desc, v_desc, k_base, v_base, sk_s, sv_s, start, end, m0,
              sk, off, qk_scale, cap_scale, cap_log2, win_left, win_right,
              MASK: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr,
              TMA: tl.constexpr, UPCAST: tl.constexpr, EVEN_K: tl.constexpr, HEAD_D: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """dQ rows m0 + local_m over key blocks [start, end): P again from the forward's statistics,
    dS = P (dP - delta), dQ += dS_16 K, rs += the row sums the correction needs (see _attn_dq_kernel):
    of dS_16, or with a softcap of dS_16 - dS; idx: per row the last key so far whose P exceeds p_half, half
    the row's largest P (the correction's centre). MASK: key-length (unless EVEN_K: whole key blocks), causal
    and window masks element-wise (the block past the sequence's end is always a masked one)."""
    dtype = k_base.dtype.element_ty
    local_m = tl.arange(0, BLOCK_M)
    cols_d = tl.arange(0, BLOCK_D)
    for n_blk in tl.range(start, end):
        n0 = n_blk * BLOCK_N
        cols = n0 + tl.arange(0, BLOCK_N)
        if TMA:
            k = k_desc.load([n0, 0])
            v = v_desc.load([n0, 0])
        else:
            kv_mask = (cols[:, None] < sk) & (cols_d[None, :] < HEAD_D)
            k = tl.load(k_base + cols[:, None].to(tl.int64) * sk_s + cols_d[None, :], mask=kv_mask, other=0.0)
            v = tl.load(v_base + cols[:, None].to(tl.int64) * sv_s + cols_d[None, :], mask=kv_mask, other=0.0)
        if UPCAST:  # the forward's product on the same tiles: the same scores, bit for bit
            k = k.to(tl.float32)
            v = v.to(tl.float32)
            qk = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            qk = tl.dot(q, tl.trans(k))
        if SOFTCAP:
            t = _tanh(qk * cap_scale)
            p = tl.math.exp2((cap_log2 * t - m2[:, None]) - l2[:, None])
        else:
            p = tl.math.exp2((qk - m2[:, None]) * qk_scale - l2[:, None])
        if MASK:  # key j against query m0 + i, bounds local_m + (m0 + ...) as in the forward
            if EVEN_K and HAS_RIGHT:  # every key block whole: the window's bounds alone
                keep = cols[None, :] <= (local_m + (m0 + off + win_right))[:, None]
            else:
                keep = cols[None, :] < sk
                if HAS_RIGHT:
                    keep &= cols[None, :] <= (local_m + (m0 + off + win_right))[:, None]
            if HAS_LEFT:
                keep &= cols[None, :] >= (local_m + (m0 + off - win_left))[:, None]
            p = tl.where(keep, p, 0.0)
        idx = tl.maximum(idx, tl.max(tl.where(p > p_half[:, None], cols[None, :], -1), 1))  # masked: p = 0
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        if SOFTCAP:
            ds = ds * (1.0 - t * t)
        if UPCAST:
            ds_lo = ds.to(dtype).to(tl.float32)
        else:
            ds_lo = ds.to(dtype)
        dq = tl.dot(ds_lo, k, dq)
        if SOFTCAP:
            rs += tl.sum(ds_lo.to(tl.float32) - ds, 1)
        else:
            rs += tl.sum(ds_lo.to(tl.float32), 1)
    return dq, rs, idx


@triton.jit
def _attn_dq_kernel(Q, K, V, DO, STATS, DELTA, DLSE, DQ, CU_Q, CU_K,
                    sq_b, sq_s, sq_h, sk_b, sk_s, sk_h, sv_b, sv_s, sv_h, sd_b, sd_s, sd_h, sdq_b, sdq_s, sdq_h,
                    sl_b, sl_h, st_plane, seqlen_q, seqlen_k, n_heads, group, sm_scale, qk_scale, cap_scale,
                    cap_log2, win_left, win_right, BUCKET_Q, BUCKET_K,
                    HEAD_D: tl.constexpr, BLOCK_D: tl.constexpr, VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr,
                    HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr, TMA: tl.constexpr, UPCAST: tl.constexpr,
                    REVERSE: tl.constexpr, HAS_DLSE: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, MAX_D: tl.constexpr):
    """One program per (query block, batch x head), shaped as the forward: Q, dO and the dQ
    accumulator stay on chip while K, V stream past in the forward's three phases (masked left
    edge, unmasked middle, masked right edge); dQ is written once, in the input dtype (no atomics:
    deterministic).

    Centring. dQ = sum_n dS_n K_n takes dS rounded to 16 bits; where the keys a row attends sit far
    from 0 (a large mean) that rounding, summed over the keys, dominates dQ (FlashAttention keeps it),
    and so does the rounding of the stored O inside delta (sum_n dS_n, exactly dlse, comes out as
    dO.(O - O_16) + dlse). With c_m a key row m attends strongly (the last key whose P is above half the
    row's largest, tracked in the loop, read once at the end): dQ_m = sum_n dS_16 K_n - c_m (sum_n dS_16 -
    dlse), the product with K - c_m, whose error scales with how far the keys the row attends lie from c_m,
    not with K. A per-row centre, not the sequence's mean key: an outlier key (an attention sink) or keys
    drifting along a causal sequence pull a shared centre away from what most rows attend. With a softcap
    sum_n dS has no closed form: c_m sum_n (dS_16 - dS) is taken out (the rounding only). Row sums and the
    centre are within a thread's quad (queries on rows): no cross-warp reduction in the loop. The centre
    was the row's best-scoring key (an arg-max a block, 24 more registers at 128x64); any strongly attended
    key does as well, as in the fused CuTe DSL backward."""
    pid_m = tl.program_id(0)
    if REVERSE:  # causal: the query blocks with the most keys first
        pid_m = tl.num_programs(0) - 1 - pid_m
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    hk = h // group
    q_start, sq = _seq_span(CU_Q, b, seqlen_q, VARLEN)
    k_start, sk = _seq_span(CU_K, b, seqlen_k, VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 < sq:
        b64 = b.to(tl.int64)
        q_base = Q + b64 * sq_b + q_start.to(tl.int64) * sq_s + h * sq_h
        do_base = DO + b64 * sd_b + q_start.to(tl.int64) * sd_s + h * sd_h
        k_base = K + b64 * sk_b + k_start.to(tl.int64) * sk_s + hk * sk_h
        v_base = V + b64 * sv_b + k_start.to(tl.int64) * sv_s + hk * sv_h
        dq_base = DQ + b64 * sdq_b + q_start.to(tl.int64) * sdq_s + h * sdq_h
        local_m = tl.arange(0, BLOCK_M)
        row_ok = local_m < sq - m0
        cols_d = tl.arange(0, BLOCK_D)
        k_desc = 0
        v_desc = 0
        if TMA:
            k_desc = tl.make_tensor_descriptor(k_base, [sk, HEAD_D], [sk_s, 1], [BLOCK_N, BLOCK_D])
            v_desc = tl.make_tensor_descriptor(v_base, [sk, HEAD_D], [sv_s, 1], [BLOCK_N, BLOCK_D])
            q = tl.make_tensor_descriptor(q_base, [sq, HEAD_D], [sq_s, 1], [BLOCK_M, BLOCK_D]).load([m0, 0])
            do = tl.make_tensor_descriptor(do_base, [sq, HEAD_D], [sd_s, 1], [BLOCK_M, BLOCK_D]).load([m0, 0])
        else:
            q_mask = row_ok[:, None] & (cols_d[None, :] < HEAD_D)
            q = tl.load(q_base + (m0 + local_m)[:, None].to(tl.int64) * sq_s + cols_d[None, :], mask=q_mask,
                        other=0.0)
            do = tl.load(do_base + (m0 + local_m)[:, None].to(tl.int64) * sd_s + cols_d[None, :], mask=q_mask,
                         other=0.0)
        if UPCAST:
            q = q.to(tl.float32)
            do = do.to(tl.float32)
        at = b64 * sl_b + h * sl_h + q_start + m0
        m2 = tl.load(STATS + at + local_m, mask=row_ok, other=0.0)
        l2 = tl.load(STATS + st_plane + at + local_m, mask=row_ok, other=float("inf"))
        delta = tl.load(DELTA + at + local_m, mask=row_ok, other=0.0)

        # key blocks: [n_lo, f_lo) masked | [f_lo, f_hi) seen by every query | [f_hi, n_hi) masked
        off, n_lo, f_lo, f_hi, n_hi = _key_blocks(m0, sq, sk, win_left, win_right, HAS_LEFT, HAS_RIGHT, BLOCK_M,
                                                  BLOCK_N)

        dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        rs = tl.zeros([BLOCK_M], tl.float32)
        idx = tl.zeros([BLOCK_M], tl.int32)
        p_half = tl.math.exp2(-1.0 - l2)  # half the row's largest P; 0 for a row that sees no key (l2 = +inf)
        state = (dq, rs, idx)  # accumulator, row sums, centre key
        if HAS_LEFT:
            state = _dq_phase(*state, q, do, m2, l2, p_half, delta, k_desc, v_desc, k_base, v_base, sk_s, sv_s, n_lo,
                              f_lo, m0, sk, off, qk_scale, cap_scale, cap_log2, win_left, win_right, True, HAS_LEFT,
                              HAS_RIGHT, SOFTCAP, TMA, UPCAST, EVEN_K, HEAD_D, BLOCK_M, BLOCK_N, BLOCK_D)
        state = _dq_phase(*state, q, do, m2, l2, p_half, delta, k_desc, v_desc, k_base, v_base, sk_s, sv_s, f_lo, f_hi,
                          m0, sk, off, qk_scale, cap_scale, cap_log2, win_left, win_right, False, HAS_LEFT, HAS_RIGHT,
                          SOFTCAP, TMA, UPCAST, EVEN_K, HEAD_D, BLOCK_M, BLOCK_N, BLOCK_D)
        dq, rs, idx = _dq_phase(*state, q, do, m2, l2, p_half, delta, k_desc, v_desc, k_base, v_base, sk_s, sv_s, f_hi,
                                n_hi, m0, sk, off, qk_scale, cap_scale, cap_log2, win_left, win_right, True, HAS_LEFT,
                                HAS_RIGHT, SOFTCAP, TMA, UPCAST, EVEN_K, HEAD_D, BLOCK_M, BLOCK_N, BLOCK_D)
        if HAS_DLSE and not SOFTCAP:  # sum_n dS = dlse, but 0 for a query that sees no key (l2 = +inf)
            rs -= tl.where(l2 == float("inf"), 0.0, tl.load(DLSE + at + local_m, mask=row_ok, other=0.0))
        c_mask = row_ok[:, None] & (cols_d[None, :] < HEAD_D) & (sk > 0)  # rs is 0 where no key is seen
        centre = tl.load(k_base + idx[:, None].to(tl.int64) * sk_s + cols_d[None, :], mask=c_mask, other=0.0)
        dq = ((dq - rs[:, None] * centre.to(tl.float32)) * sm_scale).to(DQ.dtype.element_ty)
        if TMA:
            tl.make_tensor_descriptor(dq_base, [sq, HEAD_D], [sdq_s, 1], [BLOCK_M, BLOCK_D]).store([m0, 0], dq)
        else:
            q_mask = row_ok[:, None] & (cols_d[None, :] < HEAD_D)
            tl.store(dq_base + (m0 + local_m)[:, None].to(tl.int64) * sdq_s + cols_d[None, :], dq, mask=q_mask)


# Under TRITON_INTERPRET=1 @triton.jit gives interpreted functions: the kernels then run on CPU tensors.
INTERPRETING = not isinstance(_attn_dq_kernel, triton.runtime.JITFunction)
_TUNE_KEY = ["BUCKET_Q", "BUCKET_K", "BLOCK_D", "HAS_LEFT", "HAS_RIGHT", "SOFTCAP", "VARLEN", "TMA"]
_DKDV = _attn_dkdv_kernel if INTERPRETING else triton.autotune(
    _configs(BWD_TABLE), key=_TUNE_KEY, prune_configs_by={"early_config_prune": _prune}, do_bench=_tuning_bench)(
    _attn_dkdv_kernel)
_DQ = _attn_dq_kernel if INTERPRETING else triton.autotune(
    _configs(DQ_TABLE), key=_TUNE_KEY + ["EVEN_K"],
    prune_configs_by={"early_config_prune": _prune}, do_bench=_tuning_bench)(_attn_dq_kernel)


def _tma_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    return torch.empty(size, device="cuda", dtype=torch.int8)


def _ensure_tma_allocator() -> None:
    """Device-side tensor descriptors need global scratch from an allocator Triton calls at launch.
    Set on every call: Triton keeps it per thread, and autograd runs the backward on its own thread."""
    triton.set_allocator(_tma_scratch)


def _bucket(n: int) -> int:
    """Autotuning key for a length: its power-of-two bucket (lengths in one bucket share a config)."""
    return triton.next_power_of_2(max(int(n), 1))


def _strides(t: torch.Tensor, varlen: bool) -> tuple[int, int, int]:
    """(batch, row, head) strides of a (B, S, H, D) tensor, or (0, row, head) of a packed (T, H, D) one."""
    return (0, t.stride(0), t.stride(1)) if varlen else (t.stride(0), t.stride(1), t.stride(2))


def _tma_ok(*tensors: torch.Tensor) -> bool:
    """TMA wants 16-byte aligned bases and strides (every per-(batch, head) base is one)."""
    for t in tensors:
        es = t.element_size()
        if t.data_ptr() % 16 or t.shape[-1] * es % 16 or any(s * es % 16 for s in t.stride()[:-1]):
            return False
    return True


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


@functools.lru_cache(maxsize=64)
def _block_d(d: int) -> int:
    return max(16, triton.next_power_of_2(d))


def _window_args(window: tuple[int | None, int | None]) -> tuple[int, int, bool, bool]:
    left, right = window
    return (left or 0), (right or 0), left is not None, right is not None


def _scales(scale: float, softcap: float | None) -> tuple[float, float, float]:
    """(qk_scale, cap_scale, cap_log2): scores in the log2 domain are qk * qk_scale, or with a softcap
    cap_log2 * tanh(qk * cap_scale)."""
    if softcap is None:
        return scale * LOG2E, 0.0, 0.0
    return scale * LOG2E, scale / softcap, softcap * LOG2E


def _even_keys(varlen: bool, max_k: int) -> bool:
    """Every key block is whole (no key-length mask): one key length, a multiple of every BLOCK_N (128)."""
    return not varlen and max_k % 128 == 0


def _bwd_launch(do, q, k, v, out, stats, dlse, cu_q, cu_k, max_q: int, max_k: int, scale: float,
                softcap: float | None, window) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) from the saved output and softmax statistics (stats[0]: row max, stats[1]: log2 of
    the row sum, both in log2 units, laid out like the log-sum-exp), and the log-sum-exp's gradient."""
    varlen = cu_q is not None
    q, k, v, out, do = (_unit_last(t) for t in (q, k, v, out, do.to(q.dtype)))
    stats = stats.contiguous()  # its planes and rows laid out as delta's, which the kernels index alike
    d = q.shape[-1]
    hq, hkv = q.shape[-2], k.shape[-2]
    batch = cu_q.shape[0] - 1 if varlen else q.shape[0]
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    if batch == 0 or q.numel() == 0 or k.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    sl = (0, stats.stride(1)) if varlen else (stats.stride(1), stats.stride(2))
    dummy = cu_q if varlen else stats
    ck = cu_k if varlen else dummy
    delta = torch.empty(stats.shape[1:], dtype=torch.float32, device=stats.device)
    dlse_arg = dlse.contiguous() if dlse is not None else delta
    _bwd_preprocess_kernel[(triton.cdiv(max_q, PRE_BLOCK), batch * hq)](
        out, do, dlse_arg, delta, dummy, *_strides(out, varlen), *_strides(do, varlen), *sl, max_q, hq,
        HEAD_D=d, BLOCK_D=_block_d(d), VARLEN=varlen, HAS_DLSE=dlse is not None, BLOCK_M=PRE_BLOCK)
    tma = _tma_ok(q, k, v, do, dq, dk, dv)
    if tma and q.is_cuda:
        _ensure_tma_allocator()
    win_l, win_r, has_l, has_r = _window_args(window)
    qk_scale, cap_scale, cap_log2 = _scales(scale, softcap)
    tuned = not INTERPRETING and max_q * max_k >= TUNE_MIN
    common = dict(HEAD_D=d, BLOCK_D=_block_d(d), VARLEN=varlen, HAS_LEFT=has_l, HAS_RIGHT=has_r,
                  SOFTCAP=softcap is not None, TMA=tma, UPCAST=INTERPRETING)
    if INTERPRETING:
        dkdv_blocks = dq_blocks = INTERP_BWD
    else:
        dkdv_blocks = {} if tuned else _fixed(BWD_DEFAULT, _block_d(d))
        dq_blocks = {} if tuned else _fixed(DQ_DEFAULT, _block_d(d))

    def dkdv_grid(meta):
        return (triton.cdiv(max_k, meta["BLOCK_N"]), batch * hkv)

    (_DKDV if tuned else _attn_dkdv_kernel)[dkdv_grid](
        q, k, v, do, stats, delta, dk, dv, dummy, ck, *_strides(q, varlen), *_strides(k, varlen), *_strides(v, varlen),
        *_strides(do, varlen), *_strides(dk, varlen), *_strides(dv, varlen), *sl, stats.stride(0), max_q, max_k, hkv,
        hq // hkv, scale, qk_scale, cap_scale, cap_log2, win_l, win_r, _bucket(max_q), _bucket(max_k), **common,
        **dkdv_blocks)

    def dq_grid(meta):
        return (triton.cdiv(max_q, meta["BLOCK_M"]), batch * hq)

    (_DQ if tuned else _attn_dq_kernel)[dq_grid](
        q, k, v, do, stats, delta, dlse_arg, dq, dummy, ck, *_strides(q, varlen), *_strides(k, varlen),
        *_strides(v, varlen), *_strides(do, varlen), *_strides(dq, varlen), *sl, stats.stride(0), max_q, max_k, hq,
        hq // hkv, scale, qk_scale, cap_scale, cap_log2, win_l, win_r, _bucket(max_q), _bucket(max_k),
        REVERSE=has_r and win_r <= 0, HAS_DLSE=dlse is not None, EVEN_K=_even_keys(varlen, max_k), **common,
        **dq_blocks)
    return dq, dk, dv


# the ops' CPU implementation


def _cpu_scores(q, k, scale, softcap, window, cu_q, cu_k):
    """Per sequence: (q rows, k rows, where q and k rows sit, masked scores [H, Sq, Sk] in fp32 (fp64
    for fp64 inputs), tanh of the scaled scores or None)."""
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    spans = []
    if cu_q is None:
        for b in range(q.shape[0]):
            spans.append((q[b], k[b], (b, slice(None)), (b, slice(None))))
    else:
        for b in range(cu_q.shape[0] - 1):
            qs, qe, ks, ke = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
            spans.append((q[qs:qe], k[ks:ke], slice(qs, qe), slice(ks, ke)))
    for qb, kb, q_at, k_at in spans:
        group = qb.shape[1] // kb.shape[1]
        qh = qb.to(work).transpose(0, 1)  # (H, Sq, D)
        kh = kb.to(work).transpose(0, 1).repeat_interleave(group, 0)
        s = qh @ kh.transpose(1, 2) * scale
        t = None
        if softcap is not None:
            t = torch.tanh(s / softcap)
            s = softcap * t
        i = torch.arange(qb.shape[0])[:, None] + (kb.shape[0] - qb.shape[0])
        j = torch.arange(kb.shape[0])[None, :]
        keep = torch.ones(qb.shape[0], kb.shape[0], dtype=torch.bool)
        if window[1] is not None:
            keep &= j <= i + window[1]
        if window[0] is not None:
            keep &= j >= i - window[0]
        yield qb, kb, q_at, k_at, s.masked_fill(~keep, float("-inf")), t


def attention_cpu(q, k, v, cu_q, cu_k, scale, softcap, window):
    """The ops' CPU implementation (plain torch, fp32 math): (out, lse, stats) with the kernels'
    conventions (stats as the kernels keep them: row max and log2 row sum in log2 units)."""
    out = torch.zeros(q.shape, dtype=q.dtype)
    lse = torch.full((q.shape[-2], q.shape[0]) if cu_q is not None else (q.shape[0], q.shape[2], q.shape[1]),
                     float("inf"), dtype=torch.float32)
    row_max = torch.zeros(lse.shape, dtype=torch.float32)
    for _, kb, q_at, k_at, s, _ in _cpu_scores(q, k, scale, softcap, window, cu_q, cu_k):
        group = s.shape[0] // kb.shape[1]
        vh = v[k_at].to(s.dtype).transpose(0, 1).repeat_interleave(group, 0)
        row_lse = torch.logsumexp(s, dim=-1)  # -inf where nothing is seen
        p = torch.exp(s - row_lse.clamp_min(-1e30)[..., None]).nan_to_num(0.0)
        out[q_at] = (p @ vh).transpose(0, 1).to(q.dtype)
        row_lse = torch.where(torch.isinf(row_lse), torch.full_like(row_lse, float("inf")), row_lse)
        peak = torch.where(torch.isinf(row_lse), torch.zeros_like(row_lse), s.amax(-1))
        if cu_q is None:
            lse[q_at[0]], row_max[q_at[0]] = row_lse.float(), peak.float()
        else:
            lse[:, q_at], row_max[:, q_at] = row_lse.float(), peak.float()
    unit = LOG2E if softcap is not None else 1.0 / scale  # the kernels' max: log2 units, or raw q.k
    return out, lse, torch.stack([row_max * unit, (lse - row_max) * LOG2E])


def attention_cpu_backward(do, q, k, v, out, lse, dlse, cu_q, cu_k, scale, softcap, window):
    """Gradients of attention_cpu (plain torch, fp32 math), from the saved output and log-sum-exp."""
    dq, dk, dv = (torch.zeros(t.shape, dtype=torch.float64 if t.dtype == torch.float64 else torch.float32)
                  for t in (q, k, v))
    for qb, kb, q_at, k_at, s, t in _cpu_scores(q, k, scale, softcap, window, cu_q, cu_k):
        work = s.dtype
        group = s.shape[0] // kb.shape[1]
        hkv = kb.shape[1]
        row_lse = lse[q_at[0]] if cu_q is None else lse[:, q_at]
        p = torch.exp(s - row_lse.to(work)[..., None]).nan_to_num(0.0)  # (H, Sq, Sk)
        dob = do[q_at].to(work).transpose(0, 1)
        ob = out[q_at].to(work).transpose(0, 1)
        vh = v[k_at].to(work).transpose(0, 1).repeat_interleave(group, 0)
        kh = kb.to(work).transpose(0, 1).repeat_interleave(group, 0)
        qh = qb.to(work).transpose(0, 1)
        delta = (dob * ob).sum(-1)
        if dlse is not None:
            delta = delta - (dlse[q_at[0]] if cu_q is None else dlse[:, q_at]).to(work)
        dvh = p.transpose(1, 2) @ dob
        ds = p * (dob @ vh.transpose(1, 2) - delta[..., None])
        if t is not None:
            ds = ds * (1.0 - t * t)
        ds = ds * scale
        dq[q_at] = (ds @ kh).transpose(0, 1)
        dkh = ds.transpose(1, 2) @ qh
        dk[k_at] = dkh.view(hkv, group, *dkh.shape[1:]).sum(1).transpose(0, 1)
        dv[k_at] = dvh.view(hkv, group, *dvh.shape[1:]).sum(1).transpose(0, 1)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# argument checks of the public entries (both backends take the same arguments)


def _scale_and_cap(q: torch.Tensor, scale: float | None, softcap: float | None) -> tuple[float, float | None]:
    """The softmax scale (1 / sqrt(D) by default) and the softcap (None for none, as 0 is). The kernels take each
    row's max over raw scores, which is the max of the scaled ones only for a positive scale: any other raises."""
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    if not 0 < scale < float("inf"):
        raise AttentionError(f"attention: the softmax scale must be positive and finite, got {scale}")
    cap = None if softcap is None or softcap == 0 else float(softcap)
    if cap is not None and not abs(cap) < float("inf"):
        raise AttentionError(f"attention: softcap must be finite, got {cap}")
    return scale, cap


def _window(causal: bool, window: tuple[int, int] | None) -> tuple[int | None, int | None]:
    """(left, right) with None for unbounded; a negative public value means unbounded (FA's -1)."""
    sides = (None, None) if window is None else window
    if not isinstance(sides, (tuple, list)) or len(sides) != 2 or not all(
            w is None or (isinstance(w, int) and not isinstance(w, bool)) for w in sides):
        raise AttentionError(f"attention: window must be (left, right), two ints (negative or None: unbounded); "
                             f"got {window!r}")
    left, right = (None if w is None or w < 0 else w for w in sides)
    if causal:
        right = 0 if right is None else min(right, 0)
    return left, right


# ==== end of the shared backward ====


# ---------------------------------------------------------------------------------- CuTe helpers

WG = 128  # threads of a warpgroup
SCHED_BARRIER = 2  # named barriers 2 and 3: the math warpgroups' turns (0 is __syncthreads)
DS_BARRIER = 4  # the fused backward: both halves of dS^T are in shared memory
DQ_BARRIER = 5  # 5 and 6: a math warpgroup's dQ part is in shared memory
ONES_N = 8  # the ones tile's width (the narrowest wgmma): dS times it gives dS's row sums
# math warpgroups -> (registers a math thread, a producer thread) after setmaxnreg (FA3's split: the
# producer keeps few)
REGS = {1: (256, 56), 2: (240, 24), 3: (160, 32)}


def _tma_pipe(barriers, stages: int, tx_count: int, math_wgs: int):
    """An mbarrier ring one producer thread fills by TMA (`tx_count` bytes a stage) and every math warp
    releases (one arrive each)."""
    return pipeline.PipelineTmaAsync.create(
        barrier_storage=barriers.data_ptr(), num_stages=stages, tx_count=tx_count, defer_sync=True,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, math_wgs * 4))


def _smem_layout(dtype, rows: int, cols: int, stages: int | None):
    """Row-major (cols contiguous) swizzled smem tile as wgmma reads it, optionally staged."""
    atom = warpgroup.make_smem_layout_atom(sm90_utils.get_smem_layout_atom(LayoutEnum.ROW_MAJOR, dtype, cols), dtype)
    shape = (rows, cols) if stages is None else (rows, cols, stages)
    return cute.tile_to_shape(atom, shape, order=(0, 1) if stages is None else (0, 1, 2))


def _transpose_view(t):
    """Swap the first two modes of an smem tensor (V as the (D, N) B operand of P V)."""
    shape = (t.shape[1], t.shape[0], *t.shape[2:])
    order = (1, 0, *range(2, cute.rank(t)))
    return cute.composition(t, cute.make_ordered_layout(shape, order=order))


def _aligned(t):
    """The same tensor with every stride but the last known to be a multiple of 16 bytes (the host
    checks it): TMA descriptors and vector accesses need the fact at compile time."""
    div = 128 // t.element_type.width
    strides = tuple(s if isinstance(s, int) else cute.assume(s, divby=div) for s in t.stride[:-1])
    return cute.make_tensor(t.iterator, cute.make_layout(t.shape, stride=(*strides, t.stride[-1])))


def _dense(ptr, shape: tuple):
    """The row-major tensor of `shape` (dynamic sizes) at `ptr`, its strides 64-bit (a batch's offset can
    pass 2^31 elements)."""
    strides, step = [1], cutlass.Int64(1)
    for n in reversed(shape[1:]):
        step = step * n
        strides.insert(0, step)
    return cute.make_tensor(ptr, cute.make_layout(shape, stride=tuple(strides)))


def _acc_mn(acc):
    """View an sm90 accumulator ((2, 2, V), M, N) as (rows, cols) = ((2, M), (2, V, N))."""
    lay = cute.make_layout(acc.layout.shape)
    shape = ((lay.shape[0][1], lay.shape[1]), (lay.shape[0][0], *lay.shape[0][2:], lay.shape[2]))
    stride = ((lay.stride[0][1], lay.stride[1]), (lay.stride[0][0], *lay.stride[0][2:], lay.stride[2]))
    return cute.make_tensor(acc.iterator, cute.composition(acc.layout, cute.make_layout(shape, stride=stride)))


@cute.jit
def _acc_as_a(acc_layout: cute.Layout) -> cute.Layout:
    """An fp32 accumulator layout ((2, 2, V), M, N) re-read as the A operand of the next wgmma:
    ((2, 2, 2), M, (V / 2, N)) (16-bit operands take pairs of 8-column groups)."""
    lay = cute.logical_divide(acc_layout, ((None, None, 2), None, None))
    return cute.make_layout(
        ((lay.shape[0][0], lay.shape[0][1], lay.shape[0][2][0]), lay.shape[1], (lay.shape[0][2][1], lay.shape[2])),
        stride=((lay.stride[0][0], lay.stride[0][1], lay.stride[0][2][0]), lay.stride[1],
                (lay.stride[0][2][1], lay.stride[2])))


@cute.jit
def _gemm(tiled_mma: cute.TiledMma, acc: cute.Tensor, a: cute.Tensor, b: cute.Tensor, zero_init: cutlass.Constexpr):
    """acc (+)= a b over the k blocks of one tile: fence, issue every wgmma, commit (no wait)."""
    warpgroup.fence()
    atom = cute.make_mma_atom(tiled_mma.op)
    atom.set(warpgroup.Field.ACCUMULATE, not zero_init)
    for k in cutlass.range_constexpr(cute.size(a.shape[2])):
        cute.gemm(atom, acc, a[None, None, k], b[None, None, k], acc)
        atom.set(warpgroup.Field.ACCUMULATE, True)
    warpgroup.commit_group()


@cute.jit
def _quad_max(x: Float32) -> Float32:
    """Max over the four threads of a quad (they hold one accumulator row between them)."""
    x = cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=1))
    return cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=2))


@cute.jit
def _row_total(s_mn: cute.Tensor, r: cutlass.Constexpr) -> Float32:
    """Sum of row r of an (M, N) accumulator view in four interleaved chains (a quarter of one chain's
    dependent adds; N a multiple of 4)."""
    n = cute.size(s_mn, mode=[1])
    assert n % 4 == 0 and n >= 4, f"_row_total takes rows of a multiple of 4 columns, got {n}"
    p0, p1, p2, p3 = s_mn[r, 0], s_mn[r, 1], s_mn[r, 2], s_mn[r, 3]
    for c in cutlass.range_constexpr(4, n, 4):
        p0, p1, p2, p3 = p0 + s_mn[r, c], p1 + s_mn[r, c + 1], p2 + s_mn[r, c + 2], p3 + s_mn[r, c + 3]
    return (p0 + p1) + (p2 + p3)


@cute.jit
def _quad_sum(x: Float32) -> Float32:
    x = x + cute.arch.shuffle_sync_bfly(x, offset=1)
    return x + cute.arch.shuffle_sync_bfly(x, offset=2)


@dsl_user_op
def _fma(a: Float32, b: Float32, c: Float32, *, loc=None, ip=None) -> Float32:
    """a * b + c rounded once (fma.rn.f32): the DSL's LLVM does not contract a product and a sum itself."""
    args = [Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b, c)]
    return Float32(llvm.inline_asm(Float32.mlir_type, args, "fma.rn.f32 $0, $1, $2, $3;", "=f,f,f,f",
                                   has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT))


@dsl_user_op
def _mul_rn(a: Float32, b: Float32, *, loc=None, ip=None) -> Float32:
    """a * b rounded (mul.rn.f32: never contracted into an fma with a later add, so every use sees one value)."""
    args = [Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b)]
    return Float32(llvm.inline_asm(Float32.mlir_type, args, "mul.rn.f32 $0, $1, $2;", "=f,f,f",
                                   has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT))


@dsl_user_op
def _red_max_if_found(base: cute.Pointer, index: Int32, value: Int32, *, loc=None, ip=None) -> None:
    """red.relaxed.gpu.global.max.s32 [base + 4 * index], value where value >= 0, predicated in one asm block:
    no branch, so the code around it stays one basic block the compiler can schedule as a whole (the address
    is formed inside, so no 64-bit addresses wait in registers for their atomics)."""
    args = [base.llvm_ptr, Int32(index).ir_value(loc=loc, ip=ip), Int32(value).ir_value(loc=loc, ip=ip)]
    llvm.inline_asm(
        None, args, "{\n.reg .pred p;\n.reg .b64 a;\nsetp.ge.s32 p, $2, 0;\nmad.wide.s32 a, $1, 4, $0;\n"
        "@p red.relaxed.gpu.global.max.s32 [a], $2;\n}", "l,r,r",
        has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


@dsl_user_op
def _red_add_f32_if(ptr: cute.Pointer, value: Float32, flag: Int32, *, loc=None, ip=None) -> None:
    """red.relaxed.gpu.global.add.f32 [ptr], value where flag != 0, predicated in one asm block (a global
    address: no generic-address fallback, no branch)."""
    args = [ptr.llvm_ptr, Float32(value).ir_value(loc=loc, ip=ip), Int32(flag).ir_value(loc=loc, ip=ip)]
    llvm.inline_asm(
        None, args, "{\n.reg .pred p;\nsetp.ne.s32 p, $2, 0;\n@p red.relaxed.gpu.global.add.f32 [$0], $1;\n}",
        "l,f,r", has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


@dsl_user_op
def _bulk_add_f32(gmem_ptr: cute.Pointer, smem_ptr: cute.Pointer, size_bytes: int, *, loc=None, ip=None) -> None:
    """Add `size_bytes` of fp32 from shared memory into global memory in one asynchronous bulk copy
    (cp.reduce.async.bulk ... .add.f32, one bulk group; the caller commits and waits)."""
    llvm.inline_asm(
        None, [gmem_ptr.llvm_ptr, smem_ptr.toint(loc=loc, ip=ip).ir_value(), Int32(size_bytes).ir_value()],
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;", "l,r,r",
        has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


# -------------------------------------------------------------------------------- forward kernel


class FlashFwdSm90:
    """One forward kernel's compile-time settings: dtype, head dim, tiles, pipeline depth, masks,
    softcap, causal block order, and the overlap / ping-pong schedule."""

    def __init__(self, dtype, head_dim: int, tile_m: int = 128, tile_n: int = 128, stages: int = 2,
                 has_left: bool = False, has_right: bool = False, softcap: bool = False, reverse: bool = False,
                 overlap: bool = True):
        self.dtype = dtype
        self.d = head_dim
        self.tile_m, self.tile_n, self.stages = tile_m, tile_n, stages
        self.has_left, self.has_right, self.softcap, self.reverse = has_left, has_right, softcap, reverse
        self.num_wg = tile_m // 64  # math warpgroups, 64 query rows each
        self.overlap = overlap
        self.pingpong = overlap and self.num_wg == 2
        self.threads = WG * (self.num_wg + 1)  # + the producer warpgroup
        self.mma_regs, self.load_regs = REGS[self.num_wg]

    @cute.jit
    def __call__(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor, mLSE: cute.Tensor,
                 mM2: cute.Tensor, mL2: cute.Tensor, scale_log2: Float32, cap_scale: Float32, cap_log2: Float32,
                 win_left: Int32, win_right: Int32, stream: cuda.CUstream):
        """Any strides (DLPack tensors: every mode dynamic but the unit-stride last)."""
        self._launch(mQ, mK, mV, mO, mLSE, mM2, mL2, scale_log2, cap_scale, cap_log2, win_left, win_right, stream)

    @cute.jit
    def call_dense(self, pQ: cute.Pointer, pK: cute.Pointer, pV: cute.Pointer, pO: cute.Pointer,
                   pLSE: cute.Pointer, pStats: cute.Pointer, b: Int32, sq: Int32, sk: Int32, hq: Int32, hkv: Int32,
                   scale_log2: Float32, cap_scale: Float32, cap_log2: Float32, win_left: Int32, win_right: Int32,
                   stream: cuda.CUstream):
        """Row-major q, k, v, out (B, S, H, D), lse and the statistics' two planes (B, H, S) given by base
        pointers and sizes: what a call passes costs the host a fraction of DLPack tensors."""
        rows = cutlass.Int64(b) * hq * sq  # the second statistics plane's offset
        self._launch(_dense(pQ, (b, sq, hq, self.d)), _dense(pK, (b, sk, hkv, self.d)),
                     _dense(pV, (b, sk, hkv, self.d)), _dense(pO, (b, sq, hq, self.d)), _dense(pLSE, (b, hq, sq)),
                     _dense(pStats, (b, hq, sq)), _dense(pStats + rows, (b, hq, sq)), scale_log2, cap_scale,
                     cap_log2, win_left, win_right, stream)

    @cute.jit
    def _launch(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor, mLSE: cute.Tensor,
                mM2: cute.Tensor, mL2: cute.Tensor, scale_log2: Float32, cap_scale: Float32, cap_log2: Float32,
                win_left: Int32, win_right: Int32, stream: cuda.CUstream):
        # (B, S, H, D) -> (S, D, H, B); lse and the two statistics (B, H, S) -> (S, H, B)
        mQ, mK, mV, mO = [cute.make_tensor(t.iterator, cute.select(_aligned(t).layout, mode=[1, 3, 2, 0]))
                          for t in (mQ, mK, mV, mO)]
        mLSE, mM2, mL2 = [cute.make_tensor(t.iterator, cute.select(t.layout, mode=[2, 1, 0])) for t in (mLSE, mM2, mL2)]
        tiled_mma_qk = sm90_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.K, Float32,
            atom_layout_mnk=(self.num_wg, 1, 1), tiler_mn=(64, self.tile_n))
        tiled_mma_pv = sm90_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.MN, Float32,
            atom_layout_mnk=(self.num_wg, 1, 1), tiler_mn=(64, self.d), a_source=warpgroup.OperandSource.RMEM)
        sQ_layout = _smem_layout(self.dtype, self.tile_m, self.d, None)
        sK_layout = _smem_layout(self.dtype, self.tile_n, self.d, self.stages)
        sV_layout = _smem_layout(self.dtype, self.tile_n, self.d, self.stages)
        load = cpasync.CopyBulkTensorTileG2SOp()
        tma_q, tQ = cpasync.make_tiled_tma_atom(load, mQ, sQ_layout, (self.tile_m, self.d))
        tma_k, tK = cpasync.make_tiled_tma_atom(load, mK, cute.select(sK_layout, mode=[0, 1]), (self.tile_n, self.d))
        tma_v, tV = cpasync.make_tiled_tma_atom(load, mV, cute.select(sV_layout, mode=[0, 1]), (self.tile_n, self.d))
        self.q_bytes = cute.size_in_bytes(self.dtype, sQ_layout)
        self.kv_bytes = cute.size_in_bytes(self.dtype, cute.select(sK_layout, mode=[0, 1]))

        @cute.struct
        class SharedStorage:
            mbar_q: cute.struct.MemRange[cutlass.Int64, 2]
            mbar_k: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            mbar_v: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            sQ: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sQ_layout)], 1024]
            sK: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sK_layout)], 1024]
            sV: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sV_layout)], 1024]

        grid = (cute.ceil_div(mQ.shape[0], self.tile_m), cute.size(mQ.shape[2]), cute.size(mQ.shape[3]))
        self.kernel(tQ, tK, tV, mO, (mLSE, mM2, mL2), tma_q, tma_k, tma_v, scale_log2, cap_scale, cap_log2, win_left,
                    win_right, sQ_layout, sK_layout, sV_layout, tiled_mma_qk, tiled_mma_pv, SharedStorage).launch(
            grid=grid, block=[self.threads, 1, 1], stream=stream, min_blocks_per_mp=1)

    @cute.kernel
    def kernel(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor, mStats: tuple,
               tma_q: cute.CopyAtom, tma_k: cute.CopyAtom, tma_v: cute.CopyAtom, scale_log2: Float32,
               cap_scale: Float32, cap_log2: Float32, win_left: Int32, win_right: Int32,
               sQ_layout: cute.ComposedLayout, sK_layout: cute.ComposedLayout, sV_layout: cute.ComposedLayout,
               tiled_mma_qk: cute.TiledMma, tiled_mma_pv: cute.TiledMma, SharedStorage: cutlass.Constexpr):
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        m_block, head, batch = cute.arch.block_idx()
        if const_expr(self.reverse):  # causal: the query blocks with the most keys first
            m_block = cute.arch.grid_dim()[0] - 1 - m_block
        if warp_idx == 0:
            for atom in (tma_q, tma_k, tma_v):
                cpasync.prefetch_descriptor(atom)
        smem = cutlass.utils.SmemAllocator()
        storage = smem.allocate(SharedStorage)
        pipe_q = _tma_pipe(storage.mbar_q, 1, self.q_bytes, self.num_wg)
        pipe_k = _tma_pipe(storage.mbar_k, self.stages, self.kv_bytes, self.num_wg)
        pipe_v = _tma_pipe(storage.mbar_v, self.stages, self.kv_bytes, self.num_wg)
        pipeline.pipeline_init_arrive(is_relaxed=True)
        sQ = storage.sQ.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sK = storage.sK.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        sV = storage.sV.get_tensor(sV_layout.outer, swizzle=sV_layout.inner)
        seqlen_q = mQ.shape[0]
        seqlen_k = mK.shape[0]
        head_kv = head // (mQ.shape[2] // mK.shape[2])
        blocks = self._block_range(m_block, seqlen_q, seqlen_k, win_left, win_right)
        pipeline.pipeline_init_wait()

        if warp_idx < 4:  # producer warpgroup: one warp issues the TMA loads
            cute.arch.setmaxregister_decrease(self.load_regs)
            if warp_idx == 0:
                self.load(mQ, mK, mV, sQ, sK, sV, tma_q, tma_k, tma_v, pipe_q, pipe_k, pipe_v, m_block, head,
                          head_kv, batch, blocks)
        else:
            cute.arch.setmaxregister_increase(self.mma_regs)
            tidx, _, _ = cute.arch.thread_idx()
            self.mma(tiled_mma_qk, tiled_mma_pv, mO, mStats, sQ, sK, _transpose_view(sV), pipe_q, pipe_k, pipe_v,
                     tidx - WG, m_block, head, batch, seqlen_q, seqlen_k, blocks, scale_log2, cap_scale, cap_log2,
                     win_left, win_right)

    @cute.jit
    def _block_range(self, m_block: Int32, seqlen_q: Int32, seqlen_k: Int32, win_left: Int32, win_right: Int32):
        """Key blocks of this query block: [n_lo, f_lo) masked | [f_lo, f_hi) seen by every query |
        [f_hi, n_hi) masked (causal diagonal, right window edge, the last partial block). Queries and
        keys are aligned at the bottom right (query i sees keys up to i + seqlen_k - seqlen_q)."""
        off = seqlen_k - seqlen_q
        m0 = m_block * self.tile_m
        m1 = cutlass.min(m0 + self.tile_m, seqlen_q)
        lo = Int32(0)
        hi = seqlen_k
        f_lo = Int32(0)
        f_hi = seqlen_k // self.tile_n
        if const_expr(self.has_left):
            lo = cutlass.max(m0 + off - win_left, 0)
            f_lo = (cutlass.max(m1 - 1 + off - win_left, 0) + self.tile_n - 1) // self.tile_n
        if const_expr(self.has_right):
            hi = cutlass.min(m1 + off + win_right, seqlen_k)
            f_hi = cutlass.min(f_hi, cutlass.max(m0 + off + win_right + 1, 0) // self.tile_n)
        n_lo = lo // self.tile_n
        n_hi = cutlass.max((cutlass.max(hi, 0) + self.tile_n - 1) // self.tile_n, n_lo)
        f_lo = cutlass.min(cutlass.max(f_lo, n_lo), n_hi)
        f_hi = cutlass.min(cutlass.max(f_hi, f_lo), n_hi)
        return n_lo, f_lo, f_hi, n_hi

    @cute.jit
    def load(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, sQ: cute.Tensor, sK: cute.Tensor,
             sV: cute.Tensor, tma_q: cute.CopyAtom, tma_k: cute.CopyAtom, tma_v: cute.CopyAtom, pipe_q, pipe_k,
             pipe_v, m_block: Int32, head: Int32, head_kv: Int32, batch: Int32, blocks):
        """Q once, then K and V of every key block from the last down (the consumers' order). Tiles
        past the sequence ends are zero-filled by TMA."""
        n_lo, _, _, n_hi = blocks
        gQ = cute.local_tile(mQ[None, None, head, batch], (self.tile_m, self.d), (m_block, 0))
        gK = cute.local_tile(mK[None, None, head_kv, batch], (self.tile_n, self.d), (None, 0))
        gV = cute.local_tile(mV[None, None, head_kv, batch], (self.tile_n, self.d), (None, 0))
        one = cute.make_layout(1)
        tQs, tQg = cpasync.tma_partition(tma_q, 0, one, cute.group_modes(sQ, 0, 2), cute.group_modes(gQ, 0, 2))
        tKs, tKg = cpasync.tma_partition(tma_k, 0, one, cute.group_modes(sK, 0, 2), cute.group_modes(gK, 0, 2))
        tVs, tVg = cpasync.tma_partition(tma_v, 0, one, cute.group_modes(sV, 0, 2), cute.group_modes(gV, 0, 2))
        q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
        pipe_q.producer_acquire(q_state)
        cute.copy(tma_q, tQg, tQs, tma_bar_ptr=pipe_q.producer_get_barrier(q_state))
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        for i in cutlass.range(n_hi - n_lo, unroll=1):
            n = n_hi - 1 - i
            pipe_k.producer_acquire(state)
            cute.copy(tma_k, tKg[None, n], tKs[None, state.index], tma_bar_ptr=pipe_k.producer_get_barrier(state))
            pipe_v.producer_acquire(state)
            cute.copy(tma_v, tVg[None, n], tVs[None, state.index], tma_bar_ptr=pipe_v.producer_get_barrier(state))
            state.advance()

    @cute.jit
    def mma(self, tiled_mma_qk: cute.TiledMma, tiled_mma_pv: cute.TiledMma, mO: cute.Tensor, mStats: tuple,
            sQ: cute.Tensor, sK: cute.Tensor, sVt: cute.Tensor, pipe_q, pipe_k, pipe_v, tidx: Int32, m_block: Int32,
            head: Int32, batch: Int32, seqlen_q: Int32, seqlen_k: Int32, blocks, scale_log2: Float32,
            cap_scale: Float32, cap_log2: Float32, win_left: Int32, win_right: Int32):
        """The math warpgroups: partitions, the walk over the key blocks, the epilogue."""
        n_lo, f_lo, f_hi, n_hi = blocks
        wg = cute.arch.make_warp_uniform(tidx // WG)
        wg_qk = tiled_mma_qk.get_slice(wg * WG)
        wg_pv = tiled_mma_pv.get_slice(wg * WG)
        thr_qk = tiled_mma_qk.get_slice(tidx)
        s_tile = cute.make_identity_tensor((self.tile_m, self.tile_n))
        ctx = {
            "qk": tiled_mma_qk, "pv": tiled_mma_pv, "pipe_k": pipe_k, "pipe_v": pipe_v,
            "tSrQ": wg_qk.make_fragment_A(wg_qk.partition_A(sQ)), "tSrK": wg_qk.make_fragment_B(wg_qk.partition_B(sK)),
            "tOrVt": wg_pv.make_fragment_B(wg_pv.partition_B(sVt)),
            "tOrP": wg_pv.make_fragment_A(wg_pv.partition_shape_A((self.tile_m, self.tile_n))),
            "acc_O": cute.make_rmem_tensor(wg_pv.partition_shape_C((self.tile_m, self.d)), Float32),
            "s_shape": wg_qk.partition_shape_C((self.tile_m, self.tile_n)),
            "c_mn": _acc_mn(thr_qk.partition_C(s_tile)),
            "t0_mn": _acc_mn(tiled_mma_qk.get_slice(0).partition_C(s_tile)),
            "m_block": m_block, "seqlen_k": seqlen_k, "off": seqlen_k - seqlen_q, "scale_log2": scale_log2,
            "cap_scale": cap_scale, "cap_log2": cap_log2, "win_left": win_left, "win_right": win_right,
        }
        acc_O = ctx["acc_O"]
        acc_O.fill(0.0)
        n_rows = cute.size(_acc_mn(acc_O), mode=[0])
        ctx["row_max"] = cute.make_rmem_tensor(n_rows, Float32)
        ctx["row_sum"] = cute.make_rmem_tensor(n_rows, Float32)
        ctx["row_max"].fill(-Float32.inf)
        ctx["row_sum"].fill(0.0)
        if const_expr(self.pingpong):
            if wg == 0:  # the first math warpgroup starts: pre-arrive on its own turn barrier
                cute.arch.barrier_arrive(barrier_id=SCHED_BARRIER, number_of_threads=2 * WG)
        q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        pipe_q.consumer_wait(q_state)
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        if const_expr(self.overlap):
            self._walk_overlapped(ctx, state, wg, n_lo, f_lo, f_hi, n_hi)
        else:
            for i in cutlass.range(n_hi - f_hi, unroll=1):  # right edge: masked
                state = self.step(ctx, n_hi - 1 - i, state, True)
            for i in cutlass.range(f_hi - f_lo, unroll=1):  # interior: no mask
                state = self.step(ctx, f_hi - 1 - i, state, False)
            if const_expr(self.has_left):
                for i in cutlass.range(f_lo - n_lo, unroll=1):  # left window edge: masked
                    state = self.step(ctx, f_lo - 1 - i, state, True)
        self.epilogue(tiled_mma_pv, acc_O, ctx["row_max"], ctx["row_sum"], mO, mStats, tidx, m_block, head, batch,
                      seqlen_q, scale_log2)

    @cute.jit
    def _walk_overlapped(self, ctx, state, wg: Int32, n_lo: Int32, f_lo: Int32, f_hi: Int32, n_hi: Int32):
        """First block: S and P only; then per block the next S and the current PV in flight
        together; last: the final PV. Same block order as `step`'s walk."""
        if n_hi > n_lo:
            state = self.first_half(ctx, n_hi - 1, state)
            top = n_hi - 1
            for i in cutlass.range(cutlass.max(top - f_hi, 0), unroll=1):  # right edge: masked
                state = self.overlapped_step(ctx, wg, top - 1 - i, state, True)
            b_hi = cutlass.min(f_hi, top)
            for i in cutlass.range(cutlass.max(b_hi - f_lo, 0), unroll=1):  # interior: no mask
                state = self.overlapped_step(ctx, wg, b_hi - 1 - i, state, False)
            if const_expr(self.has_left):
                c_hi = cutlass.min(f_lo, top)
                for i in cutlass.range(cutlass.max(c_hi - n_lo, 0), unroll=1):  # left window edge: masked
                    state = self.overlapped_step(ctx, wg, c_hi - 1 - i, state, True)
            self.last_half(ctx, state)

    @cute.jit
    def _scores(self, ctx, n_block: Int32, state, wait: cutlass.Constexpr):
        """Issue S = Q K^T for the K tile in `state` (and wait for it if asked)."""
        acc_S = cute.make_rmem_tensor(ctx["s_shape"], Float32)
        ctx["pipe_k"].consumer_wait(state)
        _gemm(ctx["qk"], acc_S, ctx["tSrQ"], ctx["tSrK"][None, None, None, state.index], True)
        if const_expr(wait):
            warpgroup.wait_group(0)
            ctx["pipe_k"].consumer_release(state)
        return acc_S

    @cute.jit
    def _softmax(self, ctx, acc_S: cute.Tensor, n_block: Int32, mask: cutlass.Constexpr) -> cute.Tensor:
        """The mask, then the online softmax: acc_S becomes P (unnormalised), row max and partial sums
        are updated; returns the factor each row of O must be rescaled by. Scores stay raw (q.k) and
        the scale enters the exponent: P = exp2(s * factor - base), one fma, base = max * factor rounded
        once a row. Every P of a row and the rescale between its blocks use the same rounded bases, so
        base's rounding is a common factor of O's numerator and denominator; the epilogue adds it to the
        stored log2 sum, so the backward, which recomputes P as exp2((s - max) * factor - l2) with s - max
        exact, gets the forward's P without inheriting any rounding of scores near 1e4. With a softcap
        the (bounded) scores go to log2 units first (factor 1)."""
        s_mn = _acc_mn(acc_S)
        row_max, row_sum = ctx["row_max"], ctx["row_sum"]
        rescale = cute.make_rmem_tensor(cute.size(row_max), Float32)
        factor = ctx["scale_log2"]
        if const_expr(self.softcap):
            factor = Float32(1.0)
        for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
            if const_expr(self.softcap):
                # accurate tanh: tanh.approx errs by 2^-11, times the cap that is 1e-2 on a score
                s_mn[r, None].store(cute.math.tanh(s_mn[r, None].load() * ctx["cap_scale"], fastmath=False)
                                    * ctx["cap_log2"])
            if const_expr(mask):
                self._mask_row(ctx, s_mn, r, n_block)
            m_prev = row_max[r]
            m_new = _quad_max(cute.arch.fmax(m_prev, s_mn[r, None].load().reduce(cute.ReductionOp.MAX,
                                                                                   -Float32.inf, 0)))
            m_use = m_new
            if m_new == -Float32.inf:  # nothing seen yet in this row: keep exp2 finite
                m_use = Float32(0.0)
            # one fma an element against the row's base rounded once (FA3's form; exp2((s - max) * factor)
            # took a subtraction more: 605 against 630 TFLOP/s for this form with plain-product bases, commit
            # cbd8d81, benchmarks/results/2026-12-04-h200/attention_fwd_lazy.json); the epilogue adds the
            # base's rounding to the stored log2 sum
            base = _mul_rn(m_use, factor)
            rescale[r] = cute.math.exp2(_mul_rn(m_prev, factor) - base, fastmath=True)  # the previous base
            for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
                s_mn[r, c] = cute.math.exp2(_fma(s_mn[r, c], factor, -base), fastmath=True)
            row_sum[r] = row_sum[r] * rescale[r] + _row_total(s_mn, r)
            row_max[r] = m_new
        return rescale

    @cute.jit
    def _mask_row(self, ctx, s_mn: cute.Tensor, r: cutlass.Constexpr, n_block: Int32):
        """-inf where row r's keys fall outside [lo, hi): the key length, the causal diagonal / right
        window edge, the left window edge. Thread 0's (static) column offsets are compared with the
        limits shifted by this thread's first column, so each element costs one compare."""
        c_mn, t0_mn, off = ctx["c_mn"], ctx["t0_mn"], ctx["off"]
        shift = n_block * self.tile_n + c_mn[0, 0][1]
        row = ctx["m_block"] * self.tile_m + c_mn[r, 0][0]
        hi = ctx["seqlen_k"] - shift
        if const_expr(self.has_right):
            hi = cutlass.min(hi, row + off + ctx["win_right"] + 1 - shift)
        for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
            s_mn[r, c] = -Float32.inf if t0_mn[0, c][1] >= hi else s_mn[r, c]
        if const_expr(self.has_left):
            lo = row + off - ctx["win_left"] - shift
            for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
                s_mn[r, c] = -Float32.inf if t0_mn[0, c][1] < lo else s_mn[r, c]

    @cute.jit
    def _rescale_o(self, ctx, rescale: cute.Tensor):
        # every step: skipped where no row's max moved (a branch) it was slower, 602 TFLOP/s against 630
        # (benchmarks/results/2026-12-04-h200/attention_fwd_lazy.json)
        o_mn = _acc_mn(ctx["acc_O"])
        for r in cutlass.range_constexpr(cute.size(o_mn, mode=[0])):
            o_mn[r, None].store(o_mn[r, None].load() * rescale[r])

    @cute.jit
    def _to_p(self, ctx, acc_S: cute.Tensor):
        """P (fp32 accumulator) into the 16-bit A-operand registers of the PV wgmma."""
        ctx["tOrP"].store(cute.make_tensor(acc_S.iterator, _acc_as_a(acc_S.layout)).load().to(self.dtype))

    @cute.jit
    def step(self, ctx, n_block: Int32, state, mask: cutlass.Constexpr):
        """One key block without overlap: S, softmax, O = O * rescale + P V, each waited for."""
        acc_S = self._scores(ctx, n_block, state, True)
        rescale = self._softmax(ctx, acc_S, n_block, mask)
        self._to_p(ctx, acc_S)
        self._rescale_o(ctx, rescale)
        ctx["pipe_v"].consumer_wait(state)
        _gemm(ctx["pv"], ctx["acc_O"], ctx["tOrP"], ctx["tOrVt"][None, None, None, state.index], False)
        warpgroup.wait_group(0)
        ctx["pipe_v"].consumer_release(state)
        state.advance()
        return state

    @cute.jit
    def first_half(self, ctx, n_block: Int32, state):
        """The first key block (always masked: it holds the key-length edge): S and P, no PV yet."""
        acc_S = self._scores(ctx, n_block, state, True)
        self._softmax(ctx, acc_S, n_block, True)  # O is still zero: nothing to rescale
        self._to_p(ctx, acc_S)
        return state

    @cute.jit
    def overlapped_step(self, ctx, wg: Int32, n_block: Int32, state, mask: cutlass.Constexpr):
        """S of this block and PV of the previous one in flight together; the softmax of this block
        runs while the PV finishes; then P is replaced and O rescaled."""
        v_state = state.clone()
        state.advance()
        self._turn_wait(wg)
        acc_S = self._scores(ctx, n_block, state, False)
        ctx["pipe_v"].consumer_wait(v_state)
        _gemm(ctx["pv"], ctx["acc_O"], ctx["tOrP"], ctx["tOrVt"][None, None, None, v_state.index], False)
        self._turn_pass(wg)
        warpgroup.wait_group(1)  # S is done, the PV may still run
        ctx["pipe_k"].consumer_release(state)
        rescale = self._softmax(ctx, acc_S, n_block, mask)
        warpgroup.wait_group(0)
        ctx["pipe_v"].consumer_release(v_state)
        self._to_p(ctx, acc_S)
        self._rescale_o(ctx, rescale)
        return state

    @cute.jit
    def last_half(self, ctx, state):
        """The PV of the last key block."""
        ctx["pipe_v"].consumer_wait(state)
        _gemm(ctx["pv"], ctx["acc_O"], ctx["tOrP"], ctx["tOrVt"][None, None, None, state.index], False)
        warpgroup.wait_group(0)
        ctx["pipe_v"].consumer_release(state)
        state.advance()

    @cute.jit
    def _turn_wait(self, wg: Int32):
        """Ping-pong: wait for this warpgroup's turn to issue its GEMMs."""
        if const_expr(self.pingpong):
            cute.arch.barrier(barrier_id=SCHED_BARRIER + wg, number_of_threads=2 * WG)

    @cute.jit
    def _turn_pass(self, wg: Int32):
        """Ping-pong: hand the turn to the other math warpgroup."""
        if const_expr(self.pingpong):
            cute.arch.barrier_arrive(barrier_id=SCHED_BARRIER + 1 - wg, number_of_threads=2 * WG)

    @cute.jit
    def epilogue(self, tiled_mma_pv: cute.TiledMma, acc_O: cute.Tensor, row_max: cute.Tensor, row_sum: cute.Tensor,
                 mO: cute.Tensor, mStats: tuple, tidx: Int32, m_block: Int32, head: Int32, batch: Int32,
                 seqlen_q: Int32, scale_log2: Float32):
        """O / rowsum in the output dtype, straight from registers (rows past the sequence skipped);
        lse = (max + log2 sum) * ln 2, +inf for a query that saw no key (its output is zeros); and the
        raw row max (log2 units with a softcap) and log2 sum apart (0 and +inf for an empty row), for
        the backward."""
        factor = scale_log2
        if const_expr(self.softcap):
            factor = Float32(1.0)
        thr_pv = tiled_mma_pv.get_slice(tidx)
        o_mn = _acc_mn(acc_O)
        c_mn = _acc_mn(thr_pv.partition_C(cute.make_identity_tensor((self.tile_m, self.d))))
        m_keep = cute.make_rmem_tensor(cute.size(row_sum), Float32)
        l_keep = cute.make_rmem_tensor(cute.size(row_sum), Float32)
        for r in cutlass.range_constexpr(cute.size(row_sum)):
            total = _quad_sum(row_sum[r])
            inv = 1.0 / total
            m_keep[r] = row_max[r]
            l_keep[r] = cute.math.log2(total, fastmath=False)
            # P was taken against base = max * factor rounded: the log2 sum against the exact product adds
            # base's rounding, base - max * factor, exactly (0 with a softcap: factor 1)
            l_keep[r] = l_keep[r] - _fma(row_max[r], factor, -_mul_rn(row_max[r], factor))
            if total == 0.0 or total != total:
                inv = Float32(0.0)
                m_keep[r] = Float32(0.0)
                l_keep[r] = Float32.inf
            o_mn[r, None].store(o_mn[r, None].load() * inv)
        rO = cute.make_rmem_tensor(acc_O.layout.shape, self.dtype)
        rO.store(acc_O.load().to(self.dtype))
        r_mn = _acc_mn(rO)
        gO = cute.local_tile(mO[None, None, head, batch], (self.tile_m, self.d), (m_block, 0))
        g_mn = _acc_mn(thr_pv.partition_C(gO))
        mLSE, mM2, mL2 = mStats
        gLSE, gM2, gL2 = mLSE[None, head, batch], mM2[None, head, batch], mL2[None, head, batch]
        for r in cutlass.range_constexpr(cute.size(r_mn, mode=[0])):
            row = m_block * self.tile_m + c_mn[r, 0][0]
            if row < seqlen_q:
                for c in cutlass.range_constexpr(cute.size(r_mn, mode=[1])):
                    g_mn[r, c] = r_mn[r, c]
                if c_mn[0, 0][1] == 0:
                    gLSE[row] = (m_keep[r] * factor + l_keep[r]) * LN2
                    gM2[row] = m_keep[r]
                    gL2[row] = l_keep[r]


# ---------------------------------------------------------------------------- backward: dK and dV


class FlashBwdDkDvSm90:
    """The backward's dK, dV kernel (the heavier half: four GEMMs a step): one CTA per (128 keys, kv
    head, batch) with the forward's three warpgroups. The producer warp loads K and V once, then for
    every query head of the group and every query block that sees these keys: Q with its softmax
    statistics (row max, log2 row sum, delta, one TMA box of the packed (S, 4) table) and dO, into a
    ring. Each math warpgroup owns 64 keys and works transposed (keys on rows), as the Triton kernel:
    S^T = K Q^T and dP^T = V dO^T by wgmma from shared memory, P^T = exp2((s - m) * scale_log2 - l)
    from the forward's own statistics, dV += P^T dO and dK += dS^T Q by wgmma with P^T and
    dS^T = P^T (dP^T - delta) (16-bit) as register A operands. dK, dV stay in registers over the whole
    walk and are written once (no atomics). Query rows past the sequence read l = +inf (P = 0) from the
    padded table; keys past it read zeros and their rows are not stored."""

    def __init__(self, dtype, head_dim: int, tile_m: int = 64, tile_n: int = 128, stages: int = 2,
                 has_left: bool = False, has_right: bool = False, softcap: bool = False):
        self.dtype = dtype
        self.d = head_dim
        self.tile_m, self.tile_n, self.stages = tile_m, tile_n, stages
        self.has_left, self.has_right, self.softcap = has_left, has_right, softcap
        self.num_wg = tile_n // 64  # math warpgroups, 64 keys each
        self.threads = WG * (self.num_wg + 1)
        self.mma_regs, self.load_regs = REGS[self.num_wg]

    @cute.jit
    def __call__(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mDK: cute.Tensor,
                 mDV: cute.Tensor, mTab: cute.Tensor, sm_scale: Float32, scale_log2: Float32, cap_scale: Float32,
                 cap_log2: Float32, win_left: Int32, win_right: Int32, stream: cuda.CUstream):
        # (B, S, H, D) -> (S, D, H, B); the statistics table (B, H, 4, S_pad) -> (S_pad, 4, H, B)
        mQ, mK, mV, mDO, mDK, mDV = [
            cute.make_tensor(t.iterator, cute.select(_aligned(t).layout, mode=[1, 3, 2, 0]))
            for t in (mQ, mK, mV, mDO, mDK, mDV)]
        mTab = cute.make_tensor(mTab.iterator, cute.select(_aligned(mTab).layout, mode=[3, 2, 1, 0]))
        tiled_mma_sdp, tiled_mma_dkv = self._mmas()
        (sK_layout, sQ_layout, sT_layout), (tma_q, tma_k, tma_v, tma_do, tma_t), (tQ, tK, tV, tDO, tT) = \
            self._loads(mQ, mK, mV, mDO, mTab)

        @cute.struct
        class SharedStorage:
            mbar_kv: cute.struct.MemRange[cutlass.Int64, 2]
            mbar_q: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            mbar_do: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            sT: cute.struct.Align[cute.struct.MemRange[Float32, cute.cosize(sT_layout)], 128]
            sK: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sK_layout)], 1024]
            sV: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sK_layout)], 1024]
            sQ: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sQ_layout)], 1024]
            sDO: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sQ_layout)], 1024]

        grid = (cute.ceil_div(mK.shape[0], self.tile_n), cute.size(mK.shape[2]), cute.size(mK.shape[3]))
        self.kernel(tQ, tK, tV, tDO, tT, mDK, mDV, tma_q, tma_k, tma_v, tma_do, tma_t, sm_scale, scale_log2,
                    cap_scale, cap_log2, win_left, win_right, mQ.shape[0], mQ.shape[2], sK_layout, sQ_layout,
                    sT_layout, tiled_mma_sdp, tiled_mma_dkv, SharedStorage).launch(
            grid=grid, block=[self.threads, 1, 1], stream=stream, min_blocks_per_mp=1)

    def _mmas(self):
        """S^T / dP^T (keys on rows, operands from shared memory) and dK / dV (P^T, dS^T from registers)."""
        sdp = sm90_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.K, Float32,
            atom_layout_mnk=(self.num_wg, 1, 1), tiler_mn=(64, self.tile_m))
        dkv = sm90_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.MN, Float32,
            atom_layout_mnk=(self.num_wg, 1, 1), tiler_mn=(64, self.d), a_source=warpgroup.OperandSource.RMEM)
        return sdp, dkv

    def _loads(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mTab: cute.Tensor):
        """Shared-memory layouts of K/V, the Q/dO ring and the table ring; their TMA atoms and tensors; the
        bytes each pipeline stage receives."""
        sK_layout = _smem_layout(self.dtype, self.tile_n, self.d, None)
        sQ_layout = _smem_layout(self.dtype, self.tile_m, self.d, self.stages)
        sT_layout = cute.make_layout((self.tile_m, 4, self.stages))
        load = cpasync.CopyBulkTensorTileG2SOp()
        tma_k, tK = cpasync.make_tiled_tma_atom(load, mK, sK_layout, (self.tile_n, self.d))
        tma_v, tV = cpasync.make_tiled_tma_atom(load, mV, sK_layout, (self.tile_n, self.d))
        one_q = cute.select(sQ_layout, mode=[0, 1])
        tma_q, tQ = cpasync.make_tiled_tma_atom(load, mQ, one_q, (self.tile_m, self.d))
        tma_do, tDO = cpasync.make_tiled_tma_atom(load, mDO, one_q, (self.tile_m, self.d))
        tma_t, tT = cpasync.make_tiled_tma_atom(load, mTab, cute.select(sT_layout, mode=[0, 1]), (self.tile_m, 4))
        self.kv_bytes = cute.size_in_bytes(self.dtype, sK_layout)
        self.q_bytes = cute.size_in_bytes(self.dtype, one_q)
        self.t_bytes = self.tile_m * 4 * 4
        return ((sK_layout, sQ_layout, sT_layout), (tma_q, tma_k, tma_v, tma_do, tma_t), (tQ, tK, tV, tDO, tT))

    @cute.kernel
    def kernel(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mTab: cute.Tensor,
               mDK: cute.Tensor, mDV: cute.Tensor, tma_q: cute.CopyAtom, tma_k: cute.CopyAtom,
               tma_v: cute.CopyAtom, tma_do: cute.CopyAtom, tma_t: cute.CopyAtom, sm_scale: Float32,
               scale_log2: Float32, cap_scale: Float32, cap_log2: Float32, win_left: Int32, win_right: Int32,
               seqlen_q: Int32, heads_q: Int32, sK_layout: cute.ComposedLayout, sQ_layout: cute.ComposedLayout,
               sT_layout: cute.Layout, tiled_mma_sdp: cute.TiledMma, tiled_mma_dkv: cute.TiledMma,
               SharedStorage: cutlass.Constexpr):
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        n_block, head_kv, batch = cute.arch.block_idx()
        if warp_idx == 0:
            for atom in (tma_q, tma_k, tma_v, tma_do, tma_t):
                cpasync.prefetch_descriptor(atom)
        smem = cutlass.utils.SmemAllocator()
        storage = smem.allocate(SharedStorage)
        pipe_kv = _tma_pipe(storage.mbar_kv, 1, 2 * self.kv_bytes, self.num_wg)
        pipe_q = _tma_pipe(storage.mbar_q, self.stages, self.q_bytes + self.t_bytes, self.num_wg)
        pipe_do = _tma_pipe(storage.mbar_do, self.stages, self.q_bytes, self.num_wg)
        pipeline.pipeline_init_arrive(is_relaxed=True)
        sK = storage.sK.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        sV = storage.sV.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        sQ = storage.sQ.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sDO = storage.sDO.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sT = storage.sT.get_tensor(sT_layout)
        seqlen_k = mK.shape[0]
        group = heads_q // mK.shape[2]
        blocks = self._query_range(n_block, seqlen_q, seqlen_k, win_left, win_right)
        pipeline.pipeline_init_wait()

        if warp_idx < 4:  # producer warpgroup: one warp issues the TMA loads
            cute.arch.setmaxregister_decrease(self.load_regs)
            if warp_idx == 0:
                self.load(mQ, mK, mV, mDO, mTab, sQ, sK, sV, sDO, sT, tma_q, tma_k, tma_v, tma_do, tma_t, pipe_kv,
                          pipe_q, pipe_do, n_block, head_kv, batch, group, blocks)
        else:
            cute.arch.setmaxregister_increase(self.mma_regs)
            tidx, _, _ = cute.arch.thread_idx()
            self.mma(tiled_mma_sdp, tiled_mma_dkv, mDK, mDV, sQ, sK, sV, sDO, sT, pipe_kv, pipe_q, pipe_do,
                     tidx - WG, n_block, head_kv, batch, group, seqlen_q, seqlen_k, blocks, sm_scale, scale_log2,
                     cap_scale, cap_log2, win_left, win_right)

    @cute.jit
    def _query_range(self, n_block: Int32, seqlen_q: Int32, seqlen_k: Int32, win_left: Int32, win_right: Int32):
        """Query blocks that see this key block: [m_lo, f_lo) masked | [f_lo, f_hi) every query sees
        every key | [f_hi, m_hi) masked (the Triton dK/dV kernel's ranges; bottom-right alignment)."""
        off = seqlen_k - seqlen_q
        n0 = n_block * self.tile_n
        n1 = cutlass.min(n0 + self.tile_n, seqlen_k)
        lo = Int32(0)
        hi = seqlen_q
        f_lo = Int32(0)
        f_hi = (seqlen_q + self.tile_m - 1) // self.tile_m
        if const_expr(self.has_right):  # query i reaches key j when j <= i + off + right
            lo = cutlass.max(n0 - off - win_right, 0)
            f_lo = (cutlass.max(n0 + self.tile_n - 1 - off - win_right, 0) + self.tile_m - 1) // self.tile_m
        if const_expr(self.has_left):  # ... and j >= i + off - left
            hi = cutlass.min(n1 - off + win_left, seqlen_q)
            f_hi = cutlass.min(f_hi, cutlass.max(n0 - off + win_left + 1, 0) // self.tile_m)
        m_lo = lo // self.tile_m
        m_hi = cutlass.max((cutlass.max(hi, 0) + self.tile_m - 1) // self.tile_m, m_lo)
        f_lo = cutlass.min(cutlass.max(f_lo, m_lo), m_hi)
        f_hi = cutlass.min(cutlass.max(f_hi, f_lo), m_hi)
        return m_lo, f_lo, f_hi, m_hi

    @cute.jit
    def load(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mTab: cute.Tensor,
             sQ: cute.Tensor, sK: cute.Tensor, sV: cute.Tensor, sDO: cute.Tensor, sT: cute.Tensor,
             tma_q: cute.CopyAtom, tma_k: cute.CopyAtom, tma_v: cute.CopyAtom, tma_do: cute.CopyAtom,
             tma_t: cute.CopyAtom, pipe_kv, pipe_q, pipe_do, n_block: Int32, head_kv: Int32, batch: Int32,
             group: Int32, blocks):
        """K and V once; then per query head of the group and query block (the consumers' order): Q with
        its statistics, and dO."""
        m_lo, _, _, m_hi = blocks
        one = cute.make_layout(1)
        gK = cute.local_tile(mK[None, None, head_kv, batch], (self.tile_n, self.d), (n_block, 0))
        gV = cute.local_tile(mV[None, None, head_kv, batch], (self.tile_n, self.d), (n_block, 0))
        tKs, tKg = cpasync.tma_partition(tma_k, 0, one, cute.group_modes(sK, 0, 2), cute.group_modes(gK, 0, 2))
        tVs, tVg = cpasync.tma_partition(tma_v, 0, one, cute.group_modes(sV, 0, 2), cute.group_modes(gV, 0, 2))
        kv_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
        pipe_kv.producer_acquire(kv_state)
        cute.copy(tma_k, tKg, tKs, tma_bar_ptr=pipe_kv.producer_get_barrier(kv_state))
        cute.copy(tma_v, tVg, tVs, tma_bar_ptr=pipe_kv.producer_get_barrier(kv_state))
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        for g in cutlass.range(group, unroll=1):
            head = head_kv * group + g
            gQ = cute.local_tile(mQ[None, None, head, batch], (self.tile_m, self.d), (None, 0))
            gDO = cute.local_tile(mDO[None, None, head, batch], (self.tile_m, self.d), (None, 0))
            gT = cute.local_tile(mTab[None, None, head, batch], (self.tile_m, 4), (None, 0))
            tQs, tQg = cpasync.tma_partition(tma_q, 0, one, cute.group_modes(sQ, 0, 2), cute.group_modes(gQ, 0, 2))
            tDs, tDg = cpasync.tma_partition(tma_do, 0, one, cute.group_modes(sDO, 0, 2),
                                             cute.group_modes(gDO, 0, 2))
            tTs, tTg = cpasync.tma_partition(tma_t, 0, one, cute.group_modes(sT, 0, 2), cute.group_modes(gT, 0, 2))
            for i in cutlass.range(m_hi - m_lo, unroll=1):
                m = m_lo + i  # the math warpgroups walk the blocks in this order too
                pipe_q.producer_acquire(state)
                bar = pipe_q.producer_get_barrier(state)
                cute.copy(tma_q, tQg[None, m], tQs[None, state.index], tma_bar_ptr=bar)
                cute.copy(tma_t, tTg[None, m], tTs[None, state.index], tma_bar_ptr=bar)
                pipe_do.producer_acquire(state)
                cute.copy(tma_do, tDg[None, m], tDs[None, state.index], tma_bar_ptr=pipe_do.producer_get_barrier(state))
                state.advance()

    @cute.jit
    def mma(self, tiled_mma_sdp: cute.TiledMma, tiled_mma_dkv: cute.TiledMma, mDK: cute.Tensor, mDV: cute.Tensor,
            sQ: cute.Tensor, sK: cute.Tensor, sV: cute.Tensor, sDO: cute.Tensor, sT: cute.Tensor, pipe_kv, pipe_q,
            pipe_do, tidx: Int32, n_block: Int32, head_kv: Int32, batch: Int32, group: Int32, seqlen_q: Int32,
            seqlen_k: Int32, blocks, sm_scale: Float32, scale_log2: Float32, cap_scale: Float32,
            cap_log2: Float32, win_left: Int32, win_right: Int32):
        """The math warpgroups: partitions, the walk over (query head, query block), the epilogue."""
        m_lo, f_lo, f_hi, m_hi = blocks
        wg = cute.arch.make_warp_uniform(tidx // WG)
        wg_sdp = tiled_mma_sdp.get_slice(wg * WG)
        wg_dkv = tiled_mma_dkv.get_slice(wg * WG)
        thr_sdp = tiled_mma_sdp.get_slice(tidx)
        ctx = {
            "sdp": tiled_mma_sdp, "dkv": tiled_mma_dkv, "pipe_q": pipe_q, "pipe_do": pipe_do, "sT": sT,
            "tSrK": wg_sdp.make_fragment_A(wg_sdp.partition_A(sK)),
            "tSrV": wg_sdp.make_fragment_A(wg_sdp.partition_A(sV)),
            "tSrQ": wg_sdp.make_fragment_B(wg_sdp.partition_B(sQ)),
            "tSrDO": wg_sdp.make_fragment_B(wg_sdp.partition_B(sDO)),
            "tDrQt": wg_dkv.make_fragment_B(wg_dkv.partition_B(_transpose_view(sQ))),
            "tDrDOt": wg_dkv.make_fragment_B(wg_dkv.partition_B(_transpose_view(sDO))),
            "tDrP": wg_dkv.make_fragment_A(wg_dkv.partition_shape_A((self.tile_n, self.tile_m))),
            "tDrDS": wg_dkv.make_fragment_A(wg_dkv.partition_shape_A((self.tile_n, self.tile_m))),
            "acc_dK": cute.make_rmem_tensor(wg_dkv.partition_shape_C((self.tile_n, self.d)), Float32),
            "acc_dV": cute.make_rmem_tensor(wg_dkv.partition_shape_C((self.tile_n, self.d)), Float32),
            "s_shape": wg_sdp.partition_shape_C((self.tile_n, self.tile_m)),
            "c_mn": _acc_mn(thr_sdp.partition_C(cute.make_identity_tensor((self.tile_n, self.tile_m)))),
            "n_block": n_block, "off": seqlen_k - seqlen_q, "scale_log2": scale_log2, "cap_scale": cap_scale,
            "cap_log2": cap_log2, "win_left": win_left, "win_right": win_right,
        }
        ctx["acc_dK"].fill(0.0)
        ctx["acc_dV"].fill(0.0)
        kv_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        pipe_kv.consumer_wait(kv_state)
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        for _g in cutlass.range(group, unroll=1):
            for i in cutlass.range(f_lo - m_lo, unroll=1):  # cut by the causal diagonal / right window edge
                state = self.step(ctx, m_lo + i, state, True)
            for i in cutlass.range(f_hi - f_lo, unroll=1):  # interior: no mask
                state = self.step(ctx, f_lo + i, state, False)
            for i in cutlass.range(m_hi - f_hi, unroll=1):  # cut by the left window edge
                state = self.step(ctx, f_hi + i, state, True)
        self.epilogue(tiled_mma_dkv, ctx["acc_dK"], ctx["acc_dV"], mDK, mDV, tidx, n_block, head_kv, batch,
                      seqlen_k, sm_scale)

    @cute.jit
    def step(self, ctx, m_block: Int32, state, mask: cutlass.Constexpr):
        """One query block: S^T and dP^T issued together; P^T (dV's GEMM issued as soon as it is in
        registers), then dS^T and dK's GEMM; the stage is released once both have read it. With a
        softcap P^T and dS^T come in one pass once dP^T is done (tanh is not kept: its registers
        would spill)."""
        pipe_q, pipe_do = ctx["pipe_q"], ctx["pipe_do"]
        acc_S = cute.make_rmem_tensor(ctx["s_shape"], Float32)
        acc_dP = cute.make_rmem_tensor(ctx["s_shape"], Float32)
        pipe_q.consumer_wait(state)
        _gemm(ctx["sdp"], acc_S, ctx["tSrK"], ctx["tSrQ"][None, None, None, state.index], True)
        pipe_do.consumer_wait(state)
        _gemm(ctx["sdp"], acc_dP, ctx["tSrV"], ctx["tSrDO"][None, None, None, state.index], True)
        if const_expr(self.softcap):
            warpgroup.wait_group(0)
            self._probs(ctx, acc_S, acc_dP, m_block, state.index, mask)
        else:
            warpgroup.wait_group(1)  # S^T is done, dP^T may still run
            self._probs(ctx, acc_S, None, m_block, state.index, mask)
        ctx["tDrP"].store(cute.make_tensor(acc_S.iterator, _acc_as_a(acc_S.layout)).load().to(self.dtype))
        _gemm(ctx["dkv"], ctx["acc_dV"], ctx["tDrP"], ctx["tDrDOt"][None, None, None, state.index], False)
        if const_expr(not self.softcap):
            warpgroup.wait_group(1)  # dP^T is done
            self._grads(ctx, acc_S, acc_dP, state.index)
        ctx["tDrDS"].store(cute.make_tensor(acc_dP.iterator, _acc_as_a(acc_dP.layout)).load().to(self.dtype))
        _gemm(ctx["dkv"], ctx["acc_dK"], ctx["tDrDS"], ctx["tDrQt"][None, None, None, state.index], False)
        warpgroup.wait_group(0)
        pipe_q.consumer_release(state)
        pipe_do.consumer_release(state)
        state.advance()
        return state

    @cute.jit
    def _probs(self, ctx, acc_S: cute.Tensor, acc_dP, m_block: Int32, stage: Int32, mask: cutlass.Constexpr):
        """acc_S (raw scores k.q, keys on rows) becomes P^T = exp2((s - m) * scale_log2 - l) with the
        forward's statistics of each column's query, 0 outside the mask. With a softcap (scores
        cap_log2 * tanh(s * cap_scale)) acc_dP (dP^T, done) becomes dS^T = P^T (dP^T - delta) (1 - t^2)
        in the same pass."""
        s_mn = _acc_mn(acc_S)
        c_mn, sT = ctx["c_mn"], ctx["sT"]
        for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
            col = c_mn[0, c][1]
            m2 = sT[col, 0, stage]
            l2 = sT[col, 1, stage]
            query = m_block * self.tile_m + col
            for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
                t = Float32(0.0)
                if const_expr(self.softcap):
                    t = cute.math.tanh(s_mn[r, c] * ctx["cap_scale"], fastmath=False)
                    p = cute.math.exp2(ctx["cap_log2"] * t - m2 - l2, fastmath=True)
                else:
                    p = cute.math.exp2((s_mn[r, c] - m2) * ctx["scale_log2"] - l2, fastmath=True)
                if const_expr(mask):
                    key = ctx["n_block"] * self.tile_n + c_mn[r, 0][0]
                    if const_expr(self.has_right):
                        p = Float32(0.0) if key > query + ctx["off"] + ctx["win_right"] else p
                    if const_expr(self.has_left):
                        p = Float32(0.0) if key < query + ctx["off"] - ctx["win_left"] else p
                s_mn[r, c] = p
                if const_expr(self.softcap):
                    dp_mn = _acc_mn(acc_dP)
                    dp_mn[r, c] = p * (dp_mn[r, c] - sT[col, 2, stage]) * (1.0 - t * t)

    @cute.jit
    def _grads(self, ctx, acc_S: cute.Tensor, acc_dP: cute.Tensor, stage: Int32):
        """acc_dP (dP^T) becomes dS^T = P^T (dP^T - delta)."""
        s_mn, dp_mn = _acc_mn(acc_S), _acc_mn(acc_dP)
        c_mn, sT = ctx["c_mn"], ctx["sT"]
        for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
            delta = sT[c_mn[0, c][1], 2, stage]
            for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
                dp_mn[r, c] = s_mn[r, c] * (dp_mn[r, c] - delta)

    @cute.jit
    def epilogue(self, tiled_mma_dkv: cute.TiledMma, acc_dK: cute.Tensor, acc_dV: cute.Tensor, mDK: cute.Tensor,
                 mDV: cute.Tensor, tidx: Int32, n_block: Int32, head_kv: Int32, batch: Int32, seqlen_k: Int32,
                 sm_scale: Float32):
        """dK * scale and dV in the output dtype, straight from registers (keys past the sequence skipped)."""
        thr = tiled_mma_dkv.get_slice(tidx)
        c_mn = _acc_mn(thr.partition_C(cute.make_identity_tensor((self.tile_n, self.d))))
        acc_dK.store(acc_dK.load() * sm_scale)
        for acc, mOut in ((acc_dK, mDK), (acc_dV, mDV)):
            rO = cute.make_rmem_tensor(acc.layout.shape, self.dtype)
            rO.store(acc.load().to(self.dtype))
            r_mn = _acc_mn(rO)
            g_mn = _acc_mn(thr.partition_C(cute.local_tile(mOut[None, None, head_kv, batch], (self.tile_n, self.d),
                                                           (n_block, 0))))
            for r in cutlass.range_constexpr(cute.size(r_mn, mode=[0])):
                if n_block * self.tile_n + c_mn[r, 0][0] < seqlen_k:
                    for c in cutlass.range_constexpr(cute.size(r_mn, mode=[1])):
                        g_mn[r, c] = r_mn[r, c]


class FlashBwdFusedSm90(FlashBwdDkDvSm90):
    """The backward in one kernel (FA3's five GEMMs a step instead of the split's seven; the default, see
    FUSED_BACKWARD): the dK/dV kernel, plus dQ. Each step's dS^T (16-bit, as dK's GEMM takes it) also goes
    to shared memory. After a barrier a step, each math warpgroup computes dQ's part over all 128 keys for
    one half of the head dim, dS K, by a wgmma from there, stores it in fragment order and adds it by one
    bulk asynchronous reduction (cp.reduce.async.bulk .add.f32) into a global fp32 accumulator (the shared
    schedule; with private_dq each warpgroup instead adds its own 64 keys' part over the whole head dim).
    dS times a ones tile (a 64 x 8 wgmma) gives the rows' sums of the rounded dS (added to a global row
    sum); each query's largest key index with P within a factor 2 of its largest (its best-scoring key or
    one as close) goes to a global max. A small Triton kernel then takes the rounding out around that key
    (_dq_post_kernel: the split dQ kernel's centring), scales and rounds dQ. No softcap (its row sums have
    no closed form: the split serves it). dQ is summed in an order that varies from run to run (fp32
    reductions across CTAs); dK and dV are not."""

    def __init__(self, dtype, head_dim: int, tile_m: int = 64, tile_n: int = 128, stages: int = 2,
                 has_left: bool = False, has_right: bool = False, softcap: bool = False, private_dq: bool = False,
                 ablate: tuple = (), pred_reds: bool = True):
        # the defaults are the d128 settings; _fused_tiles picks them per head dim (d64: private, no pred_reds)
        assert not softcap, "the fused backward takes no softcap"
        super().__init__(dtype, head_dim, tile_m, tile_n, stages, has_left, has_right, False)
        # private_dq: each warpgroup's dQ part over its own 64 keys only (the full head dim in passes of
        # 64 columns), no barrier between the warpgroups, both parts added into the same rows; else (shared)
        # each warpgroup one half of the head dim over all 128 keys after a barrier a step, in FA3's order
        # (dQ's GEMM, then dK's, which runs while dQ's part is stored; dK's first, or the interior query blocks
        # rotated by the key block, were slower: 7.41 and 7.40 ms against 7.28 in
        # benchmarks/results/2026-12-03-h200/attention_bwd_fused.json). On the H200 private 6.19 ms, shared 6.20
        # (benchmarks/results/2026-12-04-h200/attention_bwd_fused_shared_final.json)
        self.private_dq = private_dq
        # private dQ: columns of one GEMM pass, its part stored after each (parts added from registers by
        # red.global.add.v2.f32 instead of one bulk reduction from shared memory were slower: 9.43 ms against
        # 6.21, benchmarks/results/2026-12-04-h200/attention_bwd_fused_ablations.json)
        self.pass_n = min(64, head_dim)
        # timing ablations for benchmarks/probes/attention_bwd_fused.py (wrong dQ; never in the op): "best"
        # drops the best-key search, "rowsum" the rounded dS's row sums, "reduce" dQ's reductions, "dq" dQ
        self.ablate = frozenset(ablate)
        # pred_reds: the atomics of the best keys (unmasked steps) and of the row sums predicated inside their asm
        # instead of behind a branch each, the search on s - m, which P takes anyway: the step's loop compiles to a
        # third fewer instructions (729 against 1082 at d128). On the H200, timed once each in a fixed order, the
        # shared schedule with it took 6.07 ms (causal 3.22) against 6.12 (3.46) for the then default, private
        # without it; private with it 6.42 (3.43)
        # (benchmarks/results/2026-12-04-h200/attention_bwd_fused_pred_reds.json).
        # In three alternating rounds (attention_bwd_fused_pred_rounds.json, the same results folder) shared with
        # it took 6.18 ms (causal 3.31) against 6.26 (3.45) for private without it, the default until then, and
        # 6.43 (3.50) shared without it, 6.52 (3.47) private with it: shared with it is the default at d128
        # (_fused_tiles). The causal kernel then spills two loop-invariant values (8 bytes of stack). At d64 the
        # private schedule without it stays the default: 4.18 ms (2.30) against 4.68 (2.47) shared with it and
        # 4.33 (2.29) private with it (attention_bwd_fused_pred_rounds_d64.json).
        self.pred_reds = pred_reds
        self.ds_stages = 1 if private_dq else 2  # dS^T buffers (a private one is rewritten by its own WG only)

    @cute.jit
    def __call__(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mDK: cute.Tensor,
                 mDV: cute.Tensor, mTab: cute.Tensor, mAcc: cute.Tensor, mRS: cute.Tensor, mBest: cute.Tensor,
                 sm_scale: Float32, scale_log2: Float32, win_left: Int32, win_right: Int32, stream: cuda.CUstream):
        """Any strides (DLPack tensors: every mode dynamic but the unit-stride last)."""
        self._launch(mQ, mK, mV, mDO, mDK, mDV, mTab, mAcc, mRS, mBest, sm_scale, scale_log2, win_left, win_right,
                     stream)

    @cute.jit
    def call_dense(self, pQ: cute.Pointer, pK: cute.Pointer, pV: cute.Pointer, pDO: cute.Pointer, pDK: cute.Pointer,
                   pDV: cute.Pointer, pTab: cute.Pointer, pAcc: cute.Pointer, pRS: cute.Pointer, pBest: cute.Pointer,
                   b: Int32, sq: Int32, sk: Int32, hq: Int32, hkv: Int32, s_pad: Int32, sm_scale: Float32,
                   scale_log2: Float32, win_left: Int32, win_right: Int32, stream: cuda.CUstream):
        """Row-major tensors given by base pointers and sizes, as FlashFwdSm90.call_dense: q, do (B, Sq, Hq, D),
        k, v, dk, dv (B, Sk, Hkv, D), the table (B, Hq, 4, S_pad), the dQ accumulator (B, Hq, S_pad, D), row sums
        and best keys (B, Hq, S_pad)."""
        q_shape, kv_shape = (b, sq, hq, self.d), (b, sk, hkv, self.d)
        self._launch(_dense(pQ, q_shape), _dense(pK, kv_shape), _dense(pV, kv_shape), _dense(pDO, q_shape),
                     _dense(pDK, kv_shape), _dense(pDV, kv_shape), _dense(pTab, (b, hq, 4, s_pad)),
                     _dense(pAcc, (b, hq, s_pad, self.d)), _dense(pRS, (b, hq, s_pad)), _dense(pBest, (b, hq, s_pad)),
                     sm_scale, scale_log2, win_left, win_right, stream)

    @cute.jit
    def _launch(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mDK: cute.Tensor,
                mDV: cute.Tensor, mTab: cute.Tensor, mAcc: cute.Tensor, mRS: cute.Tensor, mBest: cute.Tensor,
                sm_scale: Float32, scale_log2: Float32, win_left: Int32, win_right: Int32, stream: cuda.CUstream):
        # (B, S, H, D) -> (S, D, H, B); the table (B, H, 4, S_pad) -> (S_pad, 4, H, B); the dQ accumulator
        # (B, H, S_pad, D) -> (S_pad, D, H, B); row sums and best keys (B, H, S_pad) -> (S_pad, H, B)
        mQ, mK, mV, mDO, mDK, mDV = [
            cute.make_tensor(t.iterator, cute.select(_aligned(t).layout, mode=[1, 3, 2, 0]))
            for t in (mQ, mK, mV, mDO, mDK, mDV)]
        mTab = cute.make_tensor(mTab.iterator, cute.select(_aligned(mTab).layout, mode=[3, 2, 1, 0]))
        s_pad, heads = mAcc.shape[2], mAcc.shape[1]  # a step's reductions at constant offsets from one address
        plane = cutlass.Int64(s_pad) * self.d  # 64-bit: the accumulator can pass 2^31 floats
        mAcc = cute.make_tensor(mAcc.iterator, cute.make_layout(
            (s_pad, self.d, heads, mAcc.shape[0]), stride=(self.d, 1, plane, heads * plane)))
        mRS, mBest = [cute.make_tensor(t.iterator, cute.select(t.layout, mode=[2, 1, 0])) for t in (mRS, mBest)]
        tiled_mma_sdp, tiled_mma_dkv = self._mmas()
        tiled_mma_dq = sm90_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, warpgroup.OperandMajorMode.MN, warpgroup.OperandMajorMode.MN, Float32,
            atom_layout_mnk=(1, 1 if self.private_dq else self.num_wg, 1),
            tiler_mn=(64, self.pass_n if self.private_dq else self.d // self.num_wg))
        tiled_mma_rs = sm90_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, warpgroup.OperandMajorMode.MN, warpgroup.OperandMajorMode.K, Float32,
            atom_layout_mnk=(1, 1, 1), tiler_mn=(64, ONES_N))
        sDS_layout = _smem_layout(self.dtype, self.tile_n, self.tile_m, self.ds_stages)  # dS^T: keys x queries
        sOnes_layout = _smem_layout(self.dtype, ONES_N, self.tile_n, None)
        # dQ's part, per math warpgroup: thread t's 4-value group j at (j * 128 + t) * 4 (conflict-free
        # 16-byte stores; _dq_post_kernel reads this order back)
        per_wg = self.tile_m * self.d // (1 if self.private_dq else self.num_wg)
        sdQ_layout = cute.make_layout(((4, WG), per_wg // (4 * WG), self.num_wg), stride=((1, 4), 4 * WG, per_wg))
        (sK_layout, sQ_layout, sT_layout), (tma_q, tma_k, tma_v, tma_do, tma_t), (tQ, tK, tV, tDO, tT) = \
            self._loads(mQ, mK, mV, mDO, mTab)

        @cute.struct
        class SharedStorage:
            mbar_kv: cute.struct.MemRange[cutlass.Int64, 2]
            mbar_q: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            mbar_do: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            sT: cute.struct.Align[cute.struct.MemRange[Float32, cute.cosize(sT_layout)], 128]
            sK: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sK_layout)], 1024]
            sV: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sK_layout)], 1024]
            sQ: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sQ_layout)], 1024]
            sDO: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sQ_layout)], 1024]
            sDS: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sDS_layout)], 1024]
            sOnes: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sOnes_layout)], 1024]
            sdQ: cute.struct.Align[cute.struct.MemRange[Float32, cute.cosize(sdQ_layout)], 128]

        grid = (cute.ceil_div(mK.shape[0], self.tile_n), cute.size(mK.shape[2]), cute.size(mK.shape[3]))
        self.kernel(tQ, tK, tV, tDO, tT, mDK, mDV, mAcc, mRS, mBest, tma_q, tma_k, tma_v, tma_do, tma_t, sm_scale,
                    scale_log2, win_left, win_right, mQ.shape[0], mQ.shape[2], sK_layout, sQ_layout, sT_layout,
                    sDS_layout, sOnes_layout, sdQ_layout, tiled_mma_sdp, tiled_mma_dkv, tiled_mma_dq, tiled_mma_rs,
                    SharedStorage).launch(grid=grid, block=[self.threads, 1, 1], stream=stream, min_blocks_per_mp=1)

    @cute.kernel
    def kernel(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mTab: cute.Tensor,
               mDK: cute.Tensor, mDV: cute.Tensor, mAcc: cute.Tensor, mRS: cute.Tensor, mBest: cute.Tensor,
               tma_q: cute.CopyAtom, tma_k: cute.CopyAtom, tma_v: cute.CopyAtom, tma_do: cute.CopyAtom,
               tma_t: cute.CopyAtom, sm_scale: Float32, scale_log2: Float32, win_left: Int32, win_right: Int32,
               seqlen_q: Int32, heads_q: Int32, sK_layout: cute.ComposedLayout, sQ_layout: cute.ComposedLayout,
               sT_layout: cute.Layout, sDS_layout: cute.ComposedLayout, sOnes_layout: cute.ComposedLayout,
               sdQ_layout: cute.Layout, tiled_mma_sdp: cute.TiledMma, tiled_mma_dkv: cute.TiledMma,
               tiled_mma_dq: cute.TiledMma, tiled_mma_rs: cute.TiledMma, SharedStorage: cutlass.Constexpr):
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        n_block, head_kv, batch = cute.arch.block_idx()
        if warp_idx == 0:
            for atom in (tma_q, tma_k, tma_v, tma_do, tma_t):
                cpasync.prefetch_descriptor(atom)
        smem = cutlass.utils.SmemAllocator()
        storage = smem.allocate(SharedStorage)
        pipe_kv = _tma_pipe(storage.mbar_kv, 1, 2 * self.kv_bytes, self.num_wg)
        pipe_q = _tma_pipe(storage.mbar_q, self.stages, self.q_bytes + self.t_bytes, self.num_wg)
        pipe_do = _tma_pipe(storage.mbar_do, self.stages, self.q_bytes, self.num_wg)
        pipeline.pipeline_init_arrive(is_relaxed=True)
        sK = storage.sK.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        sV = storage.sV.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        sQ = storage.sQ.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sDO = storage.sDO.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sT = storage.sT.get_tensor(sT_layout)
        sDS = storage.sDS.get_tensor(sDS_layout.outer, swizzle=sDS_layout.inner)
        sOnes = storage.sOnes.get_tensor(sOnes_layout.outer, swizzle=sOnes_layout.inner)
        sdQ = storage.sdQ.get_tensor(sdQ_layout)
        seqlen_k = mK.shape[0]
        group = heads_q // mK.shape[2]
        blocks = self._query_range(n_block, seqlen_q, seqlen_k, win_left, win_right)
        pipeline.pipeline_init_wait()

        if warp_idx < 4:  # producer warpgroup: one warp issues the TMA loads
            cute.arch.setmaxregister_decrease(self.load_regs)
            if warp_idx == 0:
                self.load(mQ, mK, mV, mDO, mTab, sQ, sK, sV, sDO, sT, tma_q, tma_k, tma_v, tma_do, tma_t, pipe_kv,
                          pipe_q, pipe_do, n_block, head_kv, batch, group, blocks)
        else:
            cute.arch.setmaxregister_increase(self.mma_regs)
            tidx, _, _ = cute.arch.thread_idx()
            smem_t = (sQ, sK, sV, sDO, sT, sDS, sOnes, sdQ)
            self.mma_fused((tiled_mma_sdp, tiled_mma_dkv, tiled_mma_dq, tiled_mma_rs), (mDK, mDV, mAcc, mRS, mBest),
                           smem_t, pipe_kv, pipe_q, pipe_do, tidx - WG, n_block, head_kv, batch, group, seqlen_q,
                           seqlen_k, blocks, sm_scale, scale_log2, win_left, win_right)

    @cute.jit
    def mma_fused(self, mmas, outs, smem_t, pipe_kv, pipe_q, pipe_do, tidx: Int32, n_block: Int32, head_kv: Int32,
                  batch: Int32, group: Int32, seqlen_q: Int32, seqlen_k: Int32, blocks, sm_scale: Float32,
                  scale_log2: Float32, win_left: Int32, win_right: Int32):
        """The math warpgroups: partitions, the ones tile, the walk over (query head, query block), the
        dK/dV epilogue. A key block cut by the key length takes the masked step throughout."""
        tiled_mma_sdp, tiled_mma_dkv, tiled_mma_dq, tiled_mma_rs = mmas
        mDK, mDV, mAcc, mRS, mBest = outs
        sQ, sK, sV, sDO, sT, sDS, sOnes, sdQ = smem_t
        m_lo, f_lo, f_hi, m_hi = blocks
        wg = cute.arch.make_warp_uniform(tidx // WG)
        wg_sdp = tiled_mma_sdp.get_slice(wg * WG)
        wg_dkv = tiled_mma_dkv.get_slice(wg * WG)
        wg_dq = tiled_mma_dq.get_slice(wg * WG)
        wg_rs = tiled_mma_rs.get_slice(0)
        thr_sdp = tiled_mma_sdp.get_slice(tidx)
        sDSt = _transpose_view(sDS)
        ctx = {
            "sdp": tiled_mma_sdp, "dkv": tiled_mma_dkv, "dq": tiled_mma_dq, "rs": tiled_mma_rs, "pipe_q": pipe_q,
            "pipe_do": pipe_do, "sT": sT, "sDS": sDS, "thr_sdp": thr_sdp, "wg": wg, "tidx": tidx,
            "tSrK": wg_sdp.make_fragment_A(wg_sdp.partition_A(sK)),
            "tSrV": wg_sdp.make_fragment_A(wg_sdp.partition_A(sV)),
            "tSrQ": wg_sdp.make_fragment_B(wg_sdp.partition_B(sQ)),
            "tSrDO": wg_sdp.make_fragment_B(wg_sdp.partition_B(sDO)),
            "tDrQt": wg_dkv.make_fragment_B(wg_dkv.partition_B(_transpose_view(sQ))),
            "tDrDOt": wg_dkv.make_fragment_B(wg_dkv.partition_B(_transpose_view(sDO))),
            "acc_dK": cute.make_rmem_tensor(wg_dkv.partition_shape_C((self.tile_n, self.d)), Float32),
            "acc_dV": cute.make_rmem_tensor(wg_dkv.partition_shape_C((self.tile_n, self.d)), Float32),
            "s_shape": wg_sdp.partition_shape_C((self.tile_n, self.tile_m)),
            "r_shape": wg_rs.partition_shape_C((self.tile_m, ONES_N)),
            "c_mn": _acc_mn(thr_sdp.partition_C(cute.make_identity_tensor((self.tile_n, self.tile_m)))),
            "r_mn": _acc_mn(tiled_mma_rs.get_slice(tidx % WG).partition_C(
                cute.make_identity_tensor((self.tile_m, ONES_N)))),
            "acc_out": (mAcc, mRS, mBest), "batch": batch, "sdQ": sdQ[None, None, wg], "seqlen_k": seqlen_k,
            "n_block": n_block, "off": seqlen_k - seqlen_q, "scale_log2": scale_log2,
            "near": Float32(1.0) / scale_log2, "win_left": win_left, "win_right": win_right,
        }
        # each warpgroup's own 64 keys of each dS^T buffer, and its part of the ones tile: its row sums
        own_ds = [cute.local_tile(sDSt[None, None, b], (self.tile_m, 64), (0, wg)) for b in range(self.ds_stages)]
        ctx["tRrDS"] = [wg_rs.make_fragment_A(wg_rs.partition_A(t)) for t in own_ds]
        ctx["tRrOnes"] = wg_rs.make_fragment_B(wg_rs.partition_B(cute.local_tile(sOnes, (ONES_N, 64), (0, wg))))
        if const_expr(not self.private_dq):  # dS^T of all 128 keys, this warpgroup's half of the head dim
            ctx["tQrDS"] = wg_dq.make_fragment_A(wg_dq.partition_A(sDSt))
            ctx["tQrKt"] = wg_dq.make_fragment_B(wg_dq.partition_B(_transpose_view(sK)))
            ctx["q_shape"] = wg_dq.partition_shape_C((self.tile_m, self.d))
        else:  # this warpgroup's keys: its half of dS^T, K
            wg_p = tiled_mma_dq.get_slice(0)
            ctx["tPrDSq"] = wg_p.make_fragment_A(wg_p.partition_A(own_ds[0]))
            ctx["tPrK"] = [wg_p.make_fragment_B(wg_p.partition_B(cute.local_tile(
                _transpose_view(sK), (self.pass_n, 64), (p, wg)))) for p in range(self.d // self.pass_n)]
            ctx["p_shape"] = wg_p.partition_shape_C((self.tile_m, self.pass_n))
        ctx["acc_dK"].fill(0.0)
        ctx["acc_dV"].fill(0.0)
        for i in cutlass.range_constexpr(ONES_N * self.tile_n // (self.num_wg * WG)):
            at = tidx * (ONES_N * self.tile_n // (self.num_wg * WG)) + i
            sOnes[at // self.tile_n, at % self.tile_n] = self.dtype(1.0)
        cute.arch.fence_view_async_shared()  # the ones tile, written across both warpgroups
        cute.arch.barrier(barrier_id=DS_BARRIER, number_of_threads=self.num_wg * WG)
        partial = (n_block + 1) * self.tile_n > seqlen_k
        kv_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        pipe_kv.consumer_wait(kv_state)
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        step = Int32(0)
        for g in cutlass.range(group, unroll=1):
            head = head_kv * group + g
            if partial:  # a key block cut by the key length: every step masked
                for i in cutlass.range(m_hi - m_lo, unroll=1):
                    state, step = self.fused_step(ctx, m_lo + i, head, state, step, True)
            else:
                for i in cutlass.range(f_lo - m_lo, unroll=1):  # cut by the causal diagonal / right window edge
                    state, step = self.fused_step(ctx, m_lo + i, head, state, step, True)
                for i in cutlass.range(f_hi - f_lo, unroll=1):  # interior: no mask
                    state, step = self.fused_step(ctx, f_lo + i, head, state, step, False)
                for i in cutlass.range(m_hi - f_hi, unroll=1):  # cut by the left window edge
                    state, step = self.fused_step(ctx, f_hi + i, head, state, step, True)
        if tidx % WG == 0:
            cute.arch.cp_async_bulk_wait_group(0, read=True)  # the last dQ part has left shared memory
        self.epilogue(tiled_mma_dkv, ctx["acc_dK"], ctx["acc_dV"], mDK, mDV, tidx, n_block, head_kv, batch,
                      seqlen_k, sm_scale)

    @cute.jit
    def fused_step(self, ctx, m_block: Int32, head: Int32, state, step: Int32, mask: cutlass.Constexpr):
        if const_expr(self.private_dq):
            return self.private_step(ctx, m_block, head, state, step, mask)
        return self.shared_step(ctx, m_block, head, state, step, mask)

    @cute.jit
    def shared_step(self, ctx, m_block: Int32, head: Int32, state, step: Int32, mask: cutlass.Constexpr):
        """One query block: the dK/dV step (S^T, dP^T; P^T, dV; dS^T, dK), then dS^T to shared memory,
        dQ's GEMM and the row sums' (after a barrier: both halves of dS^T written), their reductions."""
        pipe_q, pipe_do = ctx["pipe_q"], ctx["pipe_do"]
        acc_S = cute.make_rmem_tensor(ctx["s_shape"], Float32)
        acc_dP = cute.make_rmem_tensor(ctx["s_shape"], Float32)
        pipe_q.consumer_wait(state)
        _gemm(ctx["sdp"], acc_S, ctx["tSrK"], ctx["tSrQ"][None, None, None, state.index], True)
        pipe_do.consumer_wait(state)
        _gemm(ctx["sdp"], acc_dP, ctx["tSrV"], ctx["tSrDO"][None, None, None, state.index], True)
        warpgroup.wait_group(1)  # S^T is done, dP^T may still run
        self._fused_probs(ctx, acc_S, m_block, head, state.index, mask)
        rP = cute.make_rmem_tensor(acc_S.layout.shape, self.dtype)
        rP.store(acc_S.load().to(self.dtype))
        _gemm(ctx["dkv"], ctx["acc_dV"], cute.make_tensor(rP.iterator, _acc_as_a(rP.layout)),
              ctx["tDrDOt"][None, None, None, state.index], False)
        warpgroup.wait_group(1)  # dP^T is done
        self._grads(ctx, acc_S, acc_dP, state.index)
        rDS = cute.make_rmem_tensor(acc_dP.layout.shape, self.dtype)
        rDS.store(acc_dP.load().to(self.dtype))
        buf = step % 2
        cute.autovec_copy(rDS, ctx["thr_sdp"].partition_C(ctx["sDS"][None, None, buf]))
        cute.arch.fence_view_async_shared()
        if ctx["tidx"] % WG == 0:  # the last step's dQ part has left sdQ (waited next to the store instead, by each
            cute.arch.cp_async_bulk_wait_group(0, read=True)  # warpgroup: 6.35 ms against 6.19, results 2026-12-04)
        cute.arch.barrier(barrier_id=DS_BARRIER, number_of_threads=self.num_wg * WG)
        acc_dQ = cute.make_rmem_tensor(ctx["q_shape"], Float32)
        _gemm(ctx["dq"], acc_dQ, ctx["tQrDS"][None, None, None, buf], ctx["tQrKt"], True)
        _gemm(ctx["dkv"], ctx["acc_dK"], cute.make_tensor(rDS.iterator, _acc_as_a(rDS.layout)),
              ctx["tDrQt"][None, None, None, state.index], False)  # runs while dQ's part is stored
        acc_rs = self._row_sums_gemm(ctx, buf)  # last: the dQ part's store waits for dQ's GEMM only
        warpgroup.wait_group(1 + ("rowsum" not in self.ablate))
        self._reduce_dq(ctx, acc_dQ, m_block, head)
        warpgroup.wait_group(0)
        pipe_q.consumer_release(state)
        pipe_do.consumer_release(state)
        self._add_row_sums(ctx, acc_rs, m_block, head)
        state.advance()
        return state, step + 1

    @cute.jit
    def _row_sums_gemm(self, ctx, buf) -> cute.Tensor:
        """The rounded dS's row sums over this warpgroup's own 64 keys (dS times the ones tile, from dS^T
        buffer `buf`), issued as one wgmma group (none with the "rowsum" ablation)."""
        acc_rs = cute.make_rmem_tensor(ctx["r_shape"], Float32)
        if const_expr("rowsum" not in self.ablate):
            if const_expr(self.ds_stages == 1):  # private dQ: one buffer
                _gemm(ctx["rs"], acc_rs, ctx["tRrDS"][0], ctx["tRrOnes"], True)
            else:
                if buf == 0:
                    _gemm(ctx["rs"], acc_rs, ctx["tRrDS"][0], ctx["tRrOnes"], True)
                else:
                    _gemm(ctx["rs"], acc_rs, ctx["tRrDS"][1], ctx["tRrOnes"], True)
        return acc_rs

    @cute.jit
    def _add_row_sums(self, ctx, acc_rs: cute.Tensor, m_block: Int32, head: Int32):
        """The row sums to the global ones (every column of the ones product holds the sum: each quad's
        first thread adds it)."""
        if const_expr("rowsum" not in self.ablate):
            rs = ctx["acc_out"][1][None, head, ctx["batch"]]
            s_mn = _acc_mn(acc_rs)
            if const_expr(self.pred_reds):
                first = Int32(1) if ctx["tidx"] % 4 == 0 else Int32(0)
                for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
                    _red_add_f32_if(rs.iterator + m_block * self.tile_m + ctx["r_mn"][r, 0][0], s_mn[r, 0], first)
            elif ctx["tidx"] % 4 == 0:
                for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
                    row = m_block * self.tile_m + ctx["r_mn"][r, 0][0]
                    cute.arch.red(rs.iterator + row, s_mn[r, 0], op="add", dtype="f32", sem="relaxed", scope="gpu")

    @cute.jit
    def private_step(self, ctx, m_block: Int32, head: Int32, state, step: Int32, mask: cutlass.Constexpr):
        """One query block, dQ private to each warpgroup: the dK/dV step; dS^T to this warpgroup's half
        of sDS; dQ's part over its 64 keys in passes of 64 columns, each to shared memory; one bulk
        reduction of the 64 x D part; the row sums over its keys."""
        pipe_q, pipe_do = ctx["pipe_q"], ctx["pipe_do"]
        t = ctx["tidx"] % WG
        acc_S = cute.make_rmem_tensor(ctx["s_shape"], Float32)
        acc_dP = cute.make_rmem_tensor(ctx["s_shape"], Float32)
        pipe_q.consumer_wait(state)
        _gemm(ctx["sdp"], acc_S, ctx["tSrK"], ctx["tSrQ"][None, None, None, state.index], True)
        pipe_do.consumer_wait(state)
        _gemm(ctx["sdp"], acc_dP, ctx["tSrV"], ctx["tSrDO"][None, None, None, state.index], True)
        warpgroup.wait_group(1)  # S^T is done, dP^T may still run
        self._fused_probs(ctx, acc_S, m_block, head, state.index, mask)
        rP = cute.make_rmem_tensor(acc_S.layout.shape, self.dtype)
        rP.store(acc_S.load().to(self.dtype))
        _gemm(ctx["dkv"], ctx["acc_dV"], cute.make_tensor(rP.iterator, _acc_as_a(rP.layout)),
              ctx["tDrDOt"][None, None, None, state.index], False)
        warpgroup.wait_group(1)  # dP^T is done
        self._grads(ctx, acc_S, acc_dP, state.index)
        rDS = cute.make_rmem_tensor(acc_dP.layout.shape, self.dtype)
        rDS.store(acc_dP.load().to(self.dtype))
        cute.autovec_copy(rDS, ctx["thr_sdp"].partition_C(ctx["sDS"][None, None, 0]))
        _gemm(ctx["dkv"], ctx["acc_dK"], cute.make_tensor(rDS.iterator, _acc_as_a(rDS.layout)),
              ctx["tDrQt"][None, None, None, state.index], False)
        if const_expr("dq" in self.ablate):
            warpgroup.wait_group(0)
            pipe_q.consumer_release(state)
            pipe_do.consumer_release(state)
            state.advance()
            return state, step + 1
        cute.arch.fence_view_async_shared()
        if t == 0:
            cute.arch.cp_async_bulk_wait_group(0, read=True)  # the last dQ part has left sdQ
        cute.arch.barrier(barrier_id=DQ_BARRIER + ctx["wg"], number_of_threads=WG)
        acc_rs = self._row_sums_gemm(ctx, 0)
        self._dq_bulk(ctx, m_block, head, state)
        self._add_row_sums(ctx, acc_rs, m_block, head)
        state.advance()
        return state, step + 1

    @cute.jit
    def _dq_bulk(self, ctx, m_block: Int32, head: Int32, state):
        """dQ's part through shared memory: each pass's GEMM, its values stored in fragment order; the
        Q/dO stage released; one bulk reduction of the 64 x D part, issued by the warpgroup's first thread."""
        t = ctx["tidx"] % WG
        sdQ = ctx["sdQ"]  # each pass stored before the next is issued (all issued first was slower: 7.36 ms
        for p in cutlass.range_constexpr(self.d // self.pass_n):  # against 6.32 at d128, 2026-12-04-h200)
            acc = cute.make_rmem_tensor(ctx["p_shape"], Float32)
            _gemm(ctx["dq"], acc, ctx["tPrDSq"], ctx["tPrK"][p], True)
            warpgroup.wait_group(0)
            groups = cute.size(acc) // 4
            src = cute.make_tensor(acc.iterator, cute.make_layout((4, groups), stride=(1, 4)))
            dst = cute.make_tensor(sdQ.iterator + p * groups * 4 * WG + t * 4,
                                   cute.make_layout((4, groups), stride=(1, 4 * WG)))
            cute.autovec_copy(src, dst)
        ctx["pipe_q"].consumer_release(state)
        ctx["pipe_do"].consumer_release(state)
        cute.arch.fence_view_async_shared()
        cute.arch.barrier(barrier_id=DQ_BARRIER + ctx["wg"], number_of_threads=WG)
        if const_expr("reduce" not in self.ablate):
            if t == 0:
                mAcc = ctx["acc_out"][0]
                _bulk_add_f32(mAcc[None, None, head, ctx["batch"]].iterator + m_block * self.tile_m * self.d,
                              sdQ.iterator, self.tile_m * self.d * 4)
                cute.arch.cp_async_bulk_commit_group()

    @cute.jit
    def _fused_probs(self, ctx, acc_S: cute.Tensor, m_block: Int32, head: Int32, stage: Int32,
                     mask: cutlass.Constexpr):
        """acc_S (raw scores k.q, keys on rows) becomes P^T = exp2((s - m) * scale_log2 - l), 0 outside
        the mask and past the key length (masked steps); a query's largest key index among those with
        (s - m) * scale_log2 >= -1 (P at least half its largest) goes to the global best-key table."""
        s_mn = _acc_mn(acc_S)
        c_mn, sT = ctx["c_mn"], ctx["sT"]
        best = ctx["acc_out"][2][None, head, ctx["batch"]]
        for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
            col = c_mn[0, c][1]
            m2 = sT[col, 0, stage]
            l2 = sT[col, 1, stage]
            near = m2 - ctx["near"]  # the threshold without pred_reds (with it: s - m2 against -near)
            query = m_block * self.tile_m + col
            pick = Int32(-1)
            for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
                s = s_mn[r, c]
                diff = s - m2
                p = cute.math.exp2(diff * ctx["scale_log2"] - l2, fastmath=True)
                key = ctx["n_block"] * self.tile_n + c_mn[r, 0][0]
                if const_expr(self.pred_reds):
                    keep = diff >= -ctx["near"]
                else:
                    keep = s >= near
                if const_expr(mask):
                    inside = key < ctx["seqlen_k"]
                    if const_expr(self.has_right):
                        inside = inside & (key <= query + ctx["off"] + ctx["win_right"])
                    if const_expr(self.has_left):
                        inside = inside & (key >= query + ctx["off"] - ctx["win_left"])
                    p = p if inside else Float32(0.0)
                    keep = keep & inside
                pick = key if keep else pick
                s_mn[r, c] = p
            if const_expr("best" not in self.ablate):
                if const_expr(self.pred_reds and not mask):  # masked steps keep the branches: predicated,
                    _red_max_if_found(best.iterator, query, pick)  # their picks spilled (124 bytes causal)
                else:
                    if pick >= 0:
                        cute.arch.red(best.iterator + query, pick, op="max", dtype="s32", sem="relaxed",
                                      scope="gpu")

    @cute.jit
    def _reduce_dq(self, ctx, acc_dQ: cute.Tensor, m_block: Int32, head: Int32):
        """dQ's part: this warpgroup's 64 x D/2 fp32 tile to shared memory in fragment order, then one
        bulk reduction (add) into its chunk of the global accumulator, issued by the warpgroup's first
        thread."""
        mAcc = ctx["acc_out"][0]
        t = ctx["tidx"] % WG
        groups = cute.size(acc_dQ) // 4
        src = cute.make_tensor(acc_dQ.iterator, cute.make_layout((4, groups), stride=(1, 4)))
        sdQ = ctx["sdQ"]
        dst = cute.make_tensor(sdQ.iterator + t * 4, cute.make_layout((4, groups), stride=(1, 4 * WG)))
        cute.autovec_copy(src, dst)
        cute.arch.fence_view_async_shared()
        cute.arch.barrier(barrier_id=DQ_BARRIER + ctx["wg"], number_of_threads=WG)
        if t == 0:
            row = m_block * self.tile_m + ctx["wg"] * (self.tile_m // self.num_wg)  # the chunk's first float
            _bulk_add_f32(mAcc[None, None, head, ctx["batch"]].iterator + row * self.d, sdQ.iterator,
                          self.tile_m * self.d // self.num_wg * 4)
            cute.arch.cp_async_bulk_commit_group()


# ------------------------------------------------------------------------------------- backward: dQ


class FlashBwdDqSm90(FlashFwdSm90):
    """The backward's dQ kernel, shaped as the forward (whose key-block ranges it shares): one CTA per
    (128 queries, head, batch); the producer warp loads Q and dO once and K, V tiles into a ring;
    each math warpgroup owns 64 query rows: S = Q K^T and dP = dO V^T by wgmma from shared memory,
    P = exp2((s - m) * scale_log2 - l) from the forward's statistics, dS = P (dP - delta) rounded to
    16 bits, dQ += dS K by wgmma with dS as the register A operand. Each row tracks its best-scoring
    key and the sum of its rounded dS, and the epilogue takes the rounding out as the Triton dQ
    kernel does (dQ -= c (sum dS_16 - dlse), c the centre key's row: see _attn_dq_kernel, whose centre is
    the last key above half the row's largest P; any strongly attended key serves)."""

    def __init__(self, dtype, head_dim: int, tile_m: int = 128, tile_n: int = 64, stages: int = 2,
                 has_left: bool = False, has_right: bool = False, softcap: bool = False, reverse: bool = False,
                 has_dlse: bool = False):
        super().__init__(dtype, head_dim, tile_m, tile_n, stages, has_left, has_right, softcap, reverse,
                         overlap=False)
        self.has_dlse = has_dlse

    @cute.jit
    def __call__(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mDQ: cute.Tensor,
                 mTab: cute.Tensor, sm_scale: Float32, scale_log2: Float32, cap_scale: Float32, cap_log2: Float32,
                 win_left: Int32, win_right: Int32, stream: cuda.CUstream):
        mQ, mK, mV, mDO, mDQ = [
            cute.make_tensor(t.iterator, cute.select(_aligned(t).layout, mode=[1, 3, 2, 0]))
            for t in (mQ, mK, mV, mDO, mDQ)]
        mTab = cute.make_tensor(mTab.iterator, cute.select(mTab.layout, mode=[3, 2, 1, 0]))
        tiled_mma_sdp = sm90_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.K, Float32,
            atom_layout_mnk=(self.num_wg, 1, 1), tiler_mn=(64, self.tile_n))
        tiled_mma_dq = sm90_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.MN, Float32,
            atom_layout_mnk=(self.num_wg, 1, 1), tiler_mn=(64, self.d), a_source=warpgroup.OperandSource.RMEM)
        sQ_layout = _smem_layout(self.dtype, self.tile_m, self.d, None)
        sK_layout = _smem_layout(self.dtype, self.tile_n, self.d, self.stages)
        load = cpasync.CopyBulkTensorTileG2SOp()
        one_k = cute.select(sK_layout, mode=[0, 1])
        tma_q, tQ = cpasync.make_tiled_tma_atom(load, mQ, sQ_layout, (self.tile_m, self.d))
        tma_do, tDO = cpasync.make_tiled_tma_atom(load, mDO, sQ_layout, (self.tile_m, self.d))
        tma_k, tK = cpasync.make_tiled_tma_atom(load, mK, one_k, (self.tile_n, self.d))
        tma_v, tV = cpasync.make_tiled_tma_atom(load, mV, one_k, (self.tile_n, self.d))
        self.q_bytes = cute.size_in_bytes(self.dtype, sQ_layout)
        self.kv_bytes = cute.size_in_bytes(self.dtype, one_k)

        @cute.struct
        class SharedStorage:
            mbar_q: cute.struct.MemRange[cutlass.Int64, 2]
            mbar_k: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            mbar_v: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            sQ: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sQ_layout)], 1024]
            sDO: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sQ_layout)], 1024]
            sK: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sK_layout)], 1024]
            sV: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(sK_layout)], 1024]

        grid = (cute.ceil_div(mQ.shape[0], self.tile_m), cute.size(mQ.shape[2]), cute.size(mQ.shape[3]))
        self.kernel(tQ, tK, tV, tDO, mDQ, mK, mTab, tma_q, tma_k, tma_v, tma_do, sm_scale, scale_log2, cap_scale,
                    cap_log2, win_left, win_right, sQ_layout, sK_layout, tiled_mma_sdp, tiled_mma_dq,
                    SharedStorage).launch(grid=grid, block=[self.threads, 1, 1], stream=stream, min_blocks_per_mp=1)

    @cute.kernel
    def kernel(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, mDQ: cute.Tensor,
               mKg: cute.Tensor, mTab: cute.Tensor, tma_q: cute.CopyAtom, tma_k: cute.CopyAtom,
               tma_v: cute.CopyAtom, tma_do: cute.CopyAtom, sm_scale: Float32, scale_log2: Float32,
               cap_scale: Float32, cap_log2: Float32, win_left: Int32, win_right: Int32,
               sQ_layout: cute.ComposedLayout, sK_layout: cute.ComposedLayout, tiled_mma_sdp: cute.TiledMma,
               tiled_mma_dq: cute.TiledMma, SharedStorage: cutlass.Constexpr):
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        m_block, head, batch = cute.arch.block_idx()
        if const_expr(self.reverse):  # causal: the query blocks with the most keys first
            m_block = cute.arch.grid_dim()[0] - 1 - m_block
        if warp_idx == 0:
            for atom in (tma_q, tma_k, tma_v, tma_do):
                cpasync.prefetch_descriptor(atom)
        smem = cutlass.utils.SmemAllocator()
        storage = smem.allocate(SharedStorage)
        pipe_q = _tma_pipe(storage.mbar_q, 1, 2 * self.q_bytes, self.num_wg)
        pipe_k = _tma_pipe(storage.mbar_k, self.stages, self.kv_bytes, self.num_wg)
        pipe_v = _tma_pipe(storage.mbar_v, self.stages, self.kv_bytes, self.num_wg)
        pipeline.pipeline_init_arrive(is_relaxed=True)
        sQ = storage.sQ.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sDO = storage.sDO.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sK = storage.sK.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        sV = storage.sV.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        seqlen_q = mQ.shape[0]
        seqlen_k = mK.shape[0]
        head_kv = head // (mQ.shape[2] // mK.shape[2])
        blocks = self._block_range(m_block, seqlen_q, seqlen_k, win_left, win_right)
        pipeline.pipeline_init_wait()

        if warp_idx < 4:  # producer warpgroup: one warp issues the TMA loads
            cute.arch.setmaxregister_decrease(self.load_regs)
            if warp_idx == 0:
                self.load_dq(mQ, mK, mV, mDO, sQ, sK, sV, sDO, tma_q, tma_k, tma_v, tma_do, pipe_q, pipe_k, pipe_v,
                             m_block, head, head_kv, batch, blocks)
        else:
            cute.arch.setmaxregister_increase(self.mma_regs)
            tidx, _, _ = cute.arch.thread_idx()
            self.mma_dq(tiled_mma_sdp, tiled_mma_dq, mDQ, mKg, mTab, sQ, sK, sV, sDO, pipe_q, pipe_k, pipe_v,
                        tidx - WG, m_block, head, head_kv, batch, seqlen_q, seqlen_k, blocks, sm_scale, scale_log2,
                        cap_scale, cap_log2, win_left, win_right)

    @cute.jit
    def load_dq(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mDO: cute.Tensor, sQ: cute.Tensor,
                sK: cute.Tensor, sV: cute.Tensor, sDO: cute.Tensor, tma_q: cute.CopyAtom, tma_k: cute.CopyAtom,
                tma_v: cute.CopyAtom, tma_do: cute.CopyAtom, pipe_q, pipe_k, pipe_v, m_block: Int32, head: Int32,
                head_kv: Int32, batch: Int32, blocks):
        """Q and dO once, then K and V of every key block from the last down (the consumers' order)."""
        n_lo, _, _, n_hi = blocks
        one = cute.make_layout(1)
        gQ = cute.local_tile(mQ[None, None, head, batch], (self.tile_m, self.d), (m_block, 0))
        gDO = cute.local_tile(mDO[None, None, head, batch], (self.tile_m, self.d), (m_block, 0))
        gK = cute.local_tile(mK[None, None, head_kv, batch], (self.tile_n, self.d), (None, 0))
        gV = cute.local_tile(mV[None, None, head_kv, batch], (self.tile_n, self.d), (None, 0))
        tQs, tQg = cpasync.tma_partition(tma_q, 0, one, cute.group_modes(sQ, 0, 2), cute.group_modes(gQ, 0, 2))
        tDs, tDg = cpasync.tma_partition(tma_do, 0, one, cute.group_modes(sDO, 0, 2), cute.group_modes(gDO, 0, 2))
        tKs, tKg = cpasync.tma_partition(tma_k, 0, one, cute.group_modes(sK, 0, 2), cute.group_modes(gK, 0, 2))
        tVs, tVg = cpasync.tma_partition(tma_v, 0, one, cute.group_modes(sV, 0, 2), cute.group_modes(gV, 0, 2))
        q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
        pipe_q.producer_acquire(q_state)
        cute.copy(tma_q, tQg, tQs, tma_bar_ptr=pipe_q.producer_get_barrier(q_state))
        cute.copy(tma_do, tDg, tDs, tma_bar_ptr=pipe_q.producer_get_barrier(q_state))
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        for i in cutlass.range(n_hi - n_lo, unroll=1):
            n = n_hi - 1 - i
            pipe_k.producer_acquire(state)
            cute.copy(tma_k, tKg[None, n], tKs[None, state.index], tma_bar_ptr=pipe_k.producer_get_barrier(state))
            pipe_v.producer_acquire(state)
            cute.copy(tma_v, tVg[None, n], tVs[None, state.index], tma_bar_ptr=pipe_v.producer_get_barrier(state))
            state.advance()

    @cute.jit
    def mma_dq(self, tiled_mma_sdp: cute.TiledMma, tiled_mma_dq: cute.TiledMma, mDQ: cute.Tensor, mKg: cute.Tensor,
               mTab: cute.Tensor, sQ: cute.Tensor, sK: cute.Tensor, sV: cute.Tensor, sDO: cute.Tensor, pipe_q,
               pipe_k, pipe_v, tidx: Int32, m_block: Int32, head: Int32, head_kv: Int32, batch: Int32,
               seqlen_q: Int32, seqlen_k: Int32, blocks, sm_scale: Float32, scale_log2: Float32,
               cap_scale: Float32, cap_log2: Float32, win_left: Int32, win_right: Int32):
        """The math warpgroups: each row's statistics, the walk over the key blocks, the epilogue."""
        n_lo, f_lo, f_hi, n_hi = blocks
        wg = cute.arch.make_warp_uniform(tidx // WG)
        wg_sdp = tiled_mma_sdp.get_slice(wg * WG)
        wg_dq = tiled_mma_dq.get_slice(wg * WG)
        thr_sdp = tiled_mma_sdp.get_slice(tidx)
        c_mn = _acc_mn(thr_sdp.partition_C(cute.make_identity_tensor((self.tile_m, self.tile_n))))
        ctx = {
            "sdp": tiled_mma_sdp, "dq": tiled_mma_dq, "pipe_k": pipe_k, "pipe_v": pipe_v,
            "tSrQ": wg_sdp.make_fragment_A(wg_sdp.partition_A(sQ)),
            "tSrDO": wg_sdp.make_fragment_A(wg_sdp.partition_A(sDO)),
            "tSrK": wg_sdp.make_fragment_B(wg_sdp.partition_B(sK)),
            "tSrV": wg_sdp.make_fragment_B(wg_sdp.partition_B(sV)),
            "tQrKt": wg_dq.make_fragment_B(wg_dq.partition_B(_transpose_view(sK))),
            "tQrDS": wg_dq.make_fragment_A(wg_dq.partition_shape_A((self.tile_m, self.tile_n))),
            "acc_dQ": cute.make_rmem_tensor(wg_dq.partition_shape_C((self.tile_m, self.d)), Float32),
            "s_shape": wg_sdp.partition_shape_C((self.tile_m, self.tile_n)),
            "c_mn": c_mn, "m_block": m_block, "seqlen_k": seqlen_k, "off": seqlen_k - seqlen_q,
            "scale_log2": scale_log2, "cap_scale": cap_scale, "cap_log2": cap_log2, "win_left": win_left,
            "win_right": win_right,
        }
        ctx["acc_dQ"].fill(0.0)
        n_rows = cute.size(c_mn, mode=[0])
        for name in ("m2", "l2", "delta", "dlse", "rs", "best"):
            ctx[name] = cute.make_rmem_tensor(n_rows, Float32)
        ctx["idx"] = cute.make_rmem_tensor(n_rows, Int32)
        tab = mTab[None, None, head, batch]
        for r in cutlass.range_constexpr(n_rows):
            row = m_block * self.tile_m + c_mn[r, 0][0]  # < S_pad: the table is padded to whole blocks
            ctx["m2"][r] = tab[row, 0]
            ctx["l2"][r] = tab[row, 1]
            ctx["delta"][r] = tab[row, 2]
            ctx["dlse"][r] = tab[row, 3]
        ctx["rs"].fill(0.0)
        ctx["best"].fill(-Float32.inf)
        ctx["idx"].fill(0)
        q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        pipe_q.consumer_wait(q_state)
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        for i in cutlass.range(n_hi - f_hi, unroll=1):  # right edge: masked
            state = self.dq_step(ctx, n_hi - 1 - i, state, True)
        for i in cutlass.range(f_hi - f_lo, unroll=1):  # interior: no mask
            state = self.dq_step(ctx, f_hi - 1 - i, state, False)
        if const_expr(self.has_left):
            for i in cutlass.range(f_lo - n_lo, unroll=1):  # left window edge: masked
                state = self.dq_step(ctx, f_lo - 1 - i, state, True)
        self.dq_epilogue(ctx, mDQ, mKg, tidx, m_block, head, head_kv, batch, seqlen_q, sm_scale)

    @cute.jit
    def dq_step(self, ctx, n_block: Int32, state, mask: cutlass.Constexpr):
        """One key block: S and dP issued together; P (and each row's best key) while dP finishes; dS
        rounded, its row sums, dQ's GEMM; the stage released once it has read K."""
        acc_S = cute.make_rmem_tensor(ctx["s_shape"], Float32)
        acc_dP = cute.make_rmem_tensor(ctx["s_shape"], Float32)
        ctx["pipe_k"].consumer_wait(state)
        _gemm(ctx["sdp"], acc_S, ctx["tSrQ"], ctx["tSrK"][None, None, None, state.index], True)
        ctx["pipe_v"].consumer_wait(state)
        _gemm(ctx["sdp"], acc_dP, ctx["tSrDO"], ctx["tSrV"][None, None, None, state.index], True)
        warpgroup.wait_group(1)  # S is done
        t_mn = self._dq_probs(ctx, acc_S, n_block, mask)
        warpgroup.wait_group(0)  # dP is done
        ctx["pipe_v"].consumer_release(state)
        self._dq_grads(ctx, acc_S, acc_dP, t_mn)
        ctx["tQrDS"].store(cute.make_tensor(acc_dP.iterator, _acc_as_a(acc_dP.layout)).load().to(self.dtype))
        _gemm(ctx["dq"], ctx["acc_dQ"], ctx["tQrDS"], ctx["tQrKt"][None, None, None, state.index], False)
        warpgroup.wait_group(0)
        ctx["pipe_k"].consumer_release(state)
        state.advance()
        return state

    @cute.jit
    def _dq_probs(self, ctx, acc_S: cute.Tensor, n_block: Int32, mask: cutlass.Constexpr):
        """acc_S (raw q.k) becomes P = exp2((s - m) * scale_log2 - l), 0 outside the mask; each row's best
        score and its key are updated; returns tanh of the scaled scores with a softcap, else None."""
        s_mn, c_mn = _acc_mn(acc_S), ctx["c_mn"]
        best, idx = ctx["best"], ctx["idx"]
        t_mn = None
        if const_expr(self.softcap):
            t_mn = _acc_mn(cute.make_rmem_tensor(ctx["s_shape"], Float32))
        for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
            row = ctx["m_block"] * self.tile_m + c_mn[r, 0][0]
            m2, l2 = ctx["m2"][r], ctx["l2"][r]
            for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
                s = s_mn[r, c]
                key = n_block * self.tile_n + c_mn[0, c][1]
                if const_expr(self.softcap):
                    t = cute.math.tanh(s * ctx["cap_scale"], fastmath=False)
                    t_mn[r, c] = t
                    p = cute.math.exp2(ctx["cap_log2"] * t - m2 - l2, fastmath=True)
                else:
                    p = cute.math.exp2((s - m2) * ctx["scale_log2"] - l2, fastmath=True)
                if const_expr(mask):
                    keep = key < ctx["seqlen_k"]
                    if const_expr(self.has_right):
                        keep = keep & (key <= row + ctx["off"] + ctx["win_right"])
                    if const_expr(self.has_left):
                        keep = keep & (key >= row + ctx["off"] - ctx["win_left"])
                    p = p if keep else Float32(0.0)
                    s = s if keep else -Float32.inf
                better = s > best[r]
                idx[r] = key if better else idx[r]
                best[r] = s if better else best[r]
                s_mn[r, c] = p
        return t_mn

    @cute.jit
    def _dq_grads(self, ctx, acc_S: cute.Tensor, acc_dP: cute.Tensor, t_mn):
        """acc_dP becomes dS = P (dP - delta) (times 1 - t^2 with a softcap) rounded to 16 bits; each
        row's sum of the rounded dS (with a softcap: of the rounding only) goes into rs."""
        s_mn, dp_mn = _acc_mn(acc_S), _acc_mn(acc_dP)
        for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
            delta = ctx["delta"][r]
            for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
                ds = s_mn[r, c] * (dp_mn[r, c] - delta)
                if const_expr(self.softcap):
                    ds = ds * (1.0 - t_mn[r, c] * t_mn[r, c])
                dp_mn[r, c] = ds
            if const_expr(self.softcap):
                ctx["rs"][r] = ctx["rs"][r] - dp_mn[r, None].load().reduce(cute.ReductionOp.ADD, Float32.zero, 0)
        acc_dP.store(acc_dP.load().to(self.dtype).to(Float32))
        for r in cutlass.range_constexpr(cute.size(dp_mn, mode=[0])):
            ctx["rs"][r] = ctx["rs"][r] + dp_mn[r, None].load().reduce(cute.ReductionOp.ADD, Float32.zero, 0)

    @cute.jit
    def dq_epilogue(self, ctx, mDQ: cute.Tensor, mKg: cute.Tensor, tidx: Int32, m_block: Int32, head: Int32,
                    head_kv: Int32, batch: Int32, seqlen_q: Int32, sm_scale: Float32):
        """Each row's best key and rounding sum across its quad; dQ = (dQ - rs c) * scale in the output
        dtype, straight from registers (rows past the sequence skipped); c read from global memory."""
        thr = ctx["dq"].get_slice(tidx)
        acc = ctx["acc_dQ"]
        q_mn = _acc_mn(acc)
        c_mn = _acc_mn(thr.partition_C(cute.make_identity_tensor((self.tile_m, self.d))))
        keys = mKg[None, None, head_kv, batch]
        for r in cutlass.range_constexpr(cute.size(q_mn, mode=[0])):
            best, idx = ctx["best"][r], ctx["idx"][r]
            for offset in (1, 2):
                other_best = cute.arch.shuffle_sync_bfly(best, offset=offset)
                other_idx = cute.arch.shuffle_sync_bfly(idx, offset=offset)
                take = (other_best > best) | ((other_best == best) & (other_idx < idx))
                best = other_best if take else best
                idx = other_idx if take else idx
            rs = _quad_sum(ctx["rs"][r])
            if const_expr(self.has_dlse and not self.softcap):  # sum dS = dlse (0 for a row that sees no key)
                if ctx["l2"][r] != Float32.inf:
                    rs = rs - ctx["dlse"][r]
            for c in cutlass.range_constexpr(cute.size(q_mn, mode=[1])):
                centre = keys[idx, c_mn[0, c][1]].to(Float32)
                q_mn[r, c] = (q_mn[r, c] - rs * centre) * sm_scale
        rO = cute.make_rmem_tensor(acc.layout.shape, self.dtype)
        rO.store(acc.load().to(self.dtype))
        r_mn = _acc_mn(rO)
        g_mn = _acc_mn(thr.partition_C(cute.local_tile(mDQ[None, None, head, batch], (self.tile_m, self.d),
                                                       (m_block, 0))))
        for r in cutlass.range_constexpr(cute.size(r_mn, mode=[0])):
            if m_block * self.tile_m + c_mn[r, 0][0] < seqlen_q:
                for c in cutlass.range_constexpr(cute.size(r_mn, mode=[1])):
                    g_mn[r, c] = r_mn[r, c]


# --------------------------------------------------------------------------------- host launcher

HEAD_DIMS = (64, 128)
_CACHE: dict = {}  # compiled kernels (cute.compile does not cache)


def _tiles(d: int) -> dict:
    """Tiles and pipeline depth per head dim: 128 x 128 tiles, as deep a K/V ring as shared memory
    allows (Q 32 KiB + 2 x 64 KiB of K and V at d = 128). Wider key tiles (FA3's 176 at d = 128, 192 at
    d = 64; 160) were not faster here: benchmarks/results/2026-12-03-h200/attention_fwd_tiles*.json."""
    return {"tile_m": 128, "tile_n": 128, "stages": 2 if d > 64 else 3}


_ELEMENT = {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16, torch.float32: Float32,
            torch.int32: Int32}


def _cute_dtype(dtype: torch.dtype):
    """CuTe's element type for a torch dtype: the inputs' 16-bit ones (_check_cute allows no other), Float32
    and Int32 for the buffers _ptr passes."""
    return _ELEMENT[dtype]


def _to_cute(t: torch.Tensor, align: int = 16):
    """Every mode dynamic but the unit-stride last one (one compile for all shapes). `align`: what the
    base pointer is promised to be aligned to (the statistics, written element by element, sit at
    any fp32 offset: stats[1] starts B * H * S floats in)."""
    return from_dlpack(t.detach(), assumed_align=align).mark_layout_dynamic(leading_dim=t.dim() - 1)


def _ptr(t: torch.Tensor, align: int = 16):
    """t's base address as a CuTe global pointer (about a microsecond of host time; from_dlpack with its
    dynamic layout takes several), `align` as in _to_cute."""
    return make_ptr(_cute_dtype(t.dtype), t.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)


def _stream(t: torch.Tensor) -> cuda.CUstream:
    return cuda.CUstream(torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0)


def _check_cute(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """What the CuTe forward takes: (B, S, H, D) fp16/bf16, D in HEAD_DIMS, Hq a multiple of Hkv."""
    if q.dim() != 4 or k.dim() != 4 or k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise AttentionError(f"attention (CuTe): q (B, Sq, Hq, D) and k, v (B, Sk, Hkv, D) expected; got "
                             f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise AttentionError(f"attention (CuTe): fp16 or bf16 q, k, v of one dtype expected; got {q.dtype}, "
                             f"{k.dtype}, {v.dtype}")
    if q.shape[3] not in HEAD_DIMS:
        raise AttentionError(f"attention (CuTe): head dim must be one of {HEAD_DIMS}, got {q.shape[3]} "
                             "(the Triton kernels take any up to 256)")
    if k.shape[2] == 0 or q.shape[2] % k.shape[2]:
        raise AttentionError(f"attention (CuTe): {q.shape[2]} query heads is not a multiple of {k.shape[2]}")


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    """Unit last stride, 16-byte aligned base and strides (what _aligned promises the compiler): t itself, or a
    fresh row-major copy (a new allocation, since `contiguous()` hands back a row-major view whose base is off)."""
    es = t.element_size()
    if t.stride(-1) != 1 or t.data_ptr() % 16 or any(s * es % 16 for s in t.stride()[:-1]):
        return t.clone(memory_format=torch.contiguous_format)
    return t


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float | None,
                      window: tuple[int | None, int | None], overlap: bool = True
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out (B, Sq, Hq, D), lse (B, Hq, Sq) fp32, stats (2, B, Hq, Sq): row max and log2 row sum for
    the backward) by the CuTe kernel; window (left, right), None for unbounded, bottom-right aligned
    (causal is right = 0)."""
    _check_cute(q, k, v)
    q, k, v = _tma_ready(q), _tma_ready(k), _tma_ready(v)
    b, sq, hq, d = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)
    stats = torch.empty((2, b, hq, sq), dtype=torch.float32, device=q.device)
    if out.numel() == 0:
        return out, lse, stats
    if k.shape[1] == 0:
        stats[0].zero_()
        stats[1].fill_(float("inf"))
        return out.zero_(), lse.fill_(float("inf")), stats
    win_l, win_r, has_l, has_r = _window_args(window)
    qk_scale, cap_scale, cap_log2 = _scales(scale, softcap)
    flags = dict(_tiles(d), has_left=has_l, has_right=has_r, softcap=softcap is not None,
                 reverse=has_r and win_r <= 0, overlap=overlap)
    dense = q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
    if dense:  # pointers and sizes (host time: benchmarks/results/2026-12-04-h200/attention_host_cost*.json)
        tensors = [_ptr(q), _ptr(k), _ptr(v), _ptr(out), _ptr(lse, 4), _ptr(stats, 4), Int32(b), Int32(sq),
                   Int32(k.shape[1]), Int32(hq), Int32(k.shape[2])]
    else:
        tensors = [_to_cute(q), _to_cute(k), _to_cute(v), _to_cute(out), _to_cute(lse, 4), _to_cute(stats[0], 4),
                   _to_cute(stats[1], 4)]
    args = [*tensors, Float32(qk_scale), Float32(cap_scale), Float32(cap_log2), Int32(win_l), Int32(win_r)]
    stream = _stream(q)
    key = (q.dtype, d, q.device.type, tuple(sorted(flags.items())), dense)
    compiled = _CACHE.get(key)
    if compiled is None:
        kernel = FlashFwdSm90(_cute_dtype(q.dtype), d, **flags)
        compiled = cute.compile(kernel.call_dense if dense else kernel, *args, stream)
        _CACHE[key] = compiled
    compiled(*args, stream)
    return out, lse, stats


# the backward: CuTe dK/dV and dQ, both reading one statistics table

CUTE_BACKWARD = True  # False: the Triton backward of the shared block (benchmarks compare the two)
BWD_PAD = 128  # the table's rows are padded to a multiple of this (every tile_m divides it)
TAB_BLOCK = 64  # rows per program of the table kernel
POST_BLOCK = 64  # rows per program of the fused backward's dQ post-pass


def _bwd_tiles(d: int) -> dict:
    """dK/dV tiles: 128 keys (two math warpgroups) by 64 queries a step; Q and dO in a 3-stage ring (K, V
    64 KiB at d = 128 plus 32 KiB a stage; 3 stages 3.52 ms against 3.81 for 2 at the headline shape,
    benchmarks/results/2026-12-03-h200/attention_bwd_cute.json)."""
    return {"tile_m": 64, "tile_n": 128, "stages": 3}


@triton.jit
def _stats_table_kernel(Out, DO, STATS, DLSE, TAB, so_b, so_s, so_h, sd_b, sd_s, sd_h, st_b, st_h, st_plane,
                        dl_b, dl_h, seqlen_q, s_pad, n_heads, HEAD_D: tl.constexpr, BLOCK_D: tl.constexpr,
                        HAS_DLSE: tl.constexpr, BLOCK_M: tl.constexpr):
    """The CuTe backward's table (B, H, 4, S_pad) fp32, one TMA box a query block: the forward's row
    max and log2 row sum, delta = rowsum(dO O) - dlse, and dlse (0 without one). Rows past the
    sequence hold 0, +inf, 0, 0: P = 0 there."""
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    ok = rows < seqlen_q
    cols = tl.arange(0, BLOCK_D)
    b64 = b.to(tl.int64)
    r64 = rows.to(tl.int64)[:, None]
    mask = ok[:, None] & (cols[None, :] < HEAD_D)
    o = tl.load(Out + b64 * so_b + h * so_h + r64 * so_s + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + b64 * sd_b + h * sd_h + r64 * sd_s + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dlse = tl.zeros([BLOCK_M], tl.float32)
    if HAS_DLSE:
        dlse = tl.load(DLSE + b64 * dl_b + h * dl_h + rows, mask=ok, other=0.0)
    at = b64 * st_b + h * st_h + rows
    m2 = tl.load(STATS + at, mask=ok, other=0.0)
    l2 = tl.load(STATS + st_plane + at, mask=ok, other=float("inf"))
    base = TAB + bh.to(tl.int64) * 4 * s_pad + rows
    keep = rows < s_pad
    tl.store(base, m2, mask=keep)
    tl.store(base + s_pad, l2, mask=keep)
    tl.store(base + 2 * s_pad, tl.sum(o * do, 1) - dlse, mask=keep)
    tl.store(base + 3 * s_pad, dlse, mask=keep)


def _stats_table(do, out, stats, dlse) -> torch.Tensor:
    b, sq, hq, d = out.shape
    s_pad = triton.cdiv(sq, BWD_PAD) * BWD_PAD
    tab = torch.empty((b, hq, 4, s_pad), dtype=torch.float32, device=out.device)
    dl = tab if dlse is None else dlse
    _stats_table_kernel[(s_pad // TAB_BLOCK, b * hq)](
        out, do, stats, dl, tab, *_strides(out, False), *_strides(do, False), stats.stride(1), stats.stride(2),
        stats.stride(0), dl.stride(0), dl.stride(1), sq, s_pad, hq, HEAD_D=d, BLOCK_D=_block_d(d),
        HAS_DLSE=dlse is not None, BLOCK_M=TAB_BLOCK)
    return tab


def dkdv_backward(q, k, v, do, tab, dk, dv, scale: float, softcap: float | None, window) -> None:
    """dK, dV by the CuTe kernel from the statistics table (compiled once per dtype, head dim, masks)."""
    d = q.shape[3]
    win_l, win_r, has_l, has_r = _window_args(window)
    qk_scale, cap_scale, cap_log2 = _scales(scale, softcap)
    flags = dict(_bwd_tiles(d), has_left=has_l, has_right=has_r, softcap=softcap is not None)
    args = [_to_cute(q), _to_cute(k), _to_cute(v), _to_cute(do), _to_cute(dk), _to_cute(dv), _to_cute(tab),
            Float32(scale), Float32(qk_scale), Float32(cap_scale), Float32(cap_log2), Int32(win_l), Int32(win_r)]
    stream = _stream(q)
    key = ("dkdv", q.dtype, d, q.device.type, tuple(sorted(flags.items())))
    compiled = _CACHE.get(key)
    if compiled is None:
        compiled = cute.compile(FlashBwdDkDvSm90(_cute_dtype(q.dtype), d, **flags), *args, stream)
        _CACHE[key] = compiled
    compiled(*args, stream)


# True: the fused backward where it applies (no softcap; torch's deterministic mode off, since its dQ sums the
# key blocks' parts in the order they arrive), else the split one (benchmarks/results/2026-12-03-h200/
# attention_bwd_fused.json: the fused backward 5 % faster at the headline shape, 1 % causal)
FUSED_BACKWARD = True


def _fused_applies(softcap: float | None) -> bool:
    """Whether the backward runs fused: FUSED_BACKWARD, no softcap, and torch not asked for determinism."""
    return FUSED_BACKWARD and softcap is None and not torch.are_deterministic_algorithms_enabled()


@triton.jit
def _dq_post_kernel(ACC, RS, BEST, TAB, K, DQ, sk_b, sk_s, sk_h, sq_b, sq_s, sq_h, seqlen_q, s_pad, n_heads, group,
                    sm_scale, HEAD_D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                    REGION: tl.constexpr):
    """The fused backward's dQ: (acc - c (rs - dlse)) * scale in the output dtype, c the row's centre key
    (none: 0), rs the sum of its rounded dS, dlse what that sum is exactly (0 for a row that sees no
    key: l = +inf there). As the split dQ kernel's epilogue."""
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    ok = rows < seqlen_q
    at = bh.to(tl.int64) * s_pad + rows
    mask = ok[:, None] & (cols[None, :] < HEAD_D)
    # the kernel's order within a (64-row block, REGION columns) chunk: FlashBwdFusedSm90._dq_bulk / _reduce_dq
    part, cc, rr = cols // REGION, (cols % REGION)[None, :], (rows % 64)[:, None]
    t = 32 * (rr // 16) + 4 * (rr % 8) + (cc % 8) // 2  # the thread of its warpgroup, then its value
    pos = ((cc // 8) * 128 + t) * 4 + 2 * ((rr % 16) // 8) + cc % 2
    chunk = (bh.to(tl.int64) * s_pad + rows - rows % 64)[:, None] * HEAD_D + (part * 64 * REGION)[None, :]
    acc = tl.load(ACC + chunk + pos, mask=mask, other=0.0)
    rs = tl.load(RS + at, mask=ok, other=0.0)
    tab = TAB + bh.to(tl.int64) * 4 * s_pad + rows
    l2 = tl.load(tab + s_pad, mask=ok, other=float("inf"))
    dlse = tl.load(tab + 3 * s_pad, mask=ok, other=0.0)
    rs = tl.where(l2 != float("inf"), rs - dlse, rs)
    best = tl.load(BEST + at, mask=ok, other=-1)
    kb = K + b.to(tl.int64) * sk_b + (h // group) * sk_h + best.to(tl.int64)[:, None] * sk_s + cols[None, :]
    centre = tl.load(kb, mask=mask & (best >= 0)[:, None], other=0.0).to(tl.float32)
    dq = (acc - rs[:, None] * centre) * sm_scale
    out = DQ + b.to(tl.int64) * sq_b + h * sq_h + rows.to(tl.int64)[:, None] * sq_s + cols[None, :]
    tl.store(out, dq.to(DQ.dtype.element_ty), mask=mask)


def _fused_tiles(d: int) -> dict:
    """The fused kernel's settings: the dK/dV tiles; at d = 128 the shared dQ schedule with predicated atomics,
    at d = 64 the private one without (each its fastest on the H200: FlashBwdFusedSm90's notes); Q and dO in a
    2-stage ring at d = 128 (three stages do not fit in shared memory beside dS^T and dQ's part)."""
    wide = d > 64
    return {"tile_m": 64, "tile_n": 128, "stages": 2 if wide else 3, "private_dq": not wide, "pred_reds": wide}


def fused_backward(q, k, v, do, tab, dq, dk, dv, scale: float, window) -> None:
    """dQ, dK, dV by the fused CuTe kernel (no softcap) and the dQ post-pass."""
    acc, rs, best = fused_buffers(q, tab)
    fused_kernel(q, k, v, do, tab, dk, dv, acc, rs, best, scale, window)
    b, sq, hq, d = q.shape
    _dq_post_kernel[(triton.cdiv(sq, POST_BLOCK), b * hq)](
        acc, rs, best, tab, k, dq, *_strides(k, False), *_strides(dq, False), sq, tab.shape[-1], hq,
        hq // k.shape[2], scale, HEAD_D=d, BLOCK_D=_block_d(d), BLOCK_M=POST_BLOCK, REGION=_dq_region(d))


def _dq_region(d: int) -> int:
    """Columns of dQ one fragment-ordered region of the accumulator holds: a warpgroup's half of the head
    dim, or with private parts a pass of 64 columns."""
    return min(64, d) if _fused_tiles(d)["private_dq"] else d // 2


def fused_buffers(q, tab) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fused kernel's dQ accumulator (fp32, zeros), row sums (zeros) and best keys (-1), over the
    table's padded rows (the last query block's rows need no bounds)."""
    b, _, hq, d = q.shape
    s_pad = tab.shape[-1]
    return (torch.zeros((b, hq, s_pad, d), dtype=torch.float32, device=q.device),
            torch.zeros((b, hq, s_pad), dtype=torch.float32, device=q.device),
            torch.full((b, hq, s_pad), -1, dtype=torch.int32, device=q.device))


def _fused_tensors(tensors: tuple, dense: bool) -> list:
    """The fused kernel's tensor arguments: base pointers and sizes (b, sq, sk, hq, hkv, s_pad) for its pointer
    launch, else DLPack tensors; the row sums and best keys promised 4-byte alignment only."""
    q, k, *_, tab, _, rs, best = tensors
    if dense:
        b, sq, hq, _ = q.shape
        sizes = (b, sq, k.shape[1], hq, k.shape[2], tab.shape[-1])
        return [*(_ptr(t) for t in tensors[:8]), _ptr(rs, 4), _ptr(best, 4), *(Int32(n) for n in sizes)]
    return [*(_to_cute(t) for t in tensors[:8]), _to_cute(rs, 4), _to_cute(best, 4)]


def fused_kernel(q, k, v, do, tab, dk, dv, acc, rs, best, scale: float, window, dense: bool | None = None) -> None:
    """dK, dV and dQ's parts by the fused CuTe kernel (compiled once per dtype, head dim, masks, launch). `dense`:
    launched by base pointers and sizes (every tensor row-major), else by DLPack tensors; None: whichever the
    tensors allow (False takes row-major ones too: benchmarks compare the two launches)."""
    d = q.shape[3]
    win_l, win_r, has_l, has_r = _window_args(window)
    flags = dict(_fused_tiles(d), has_left=has_l, has_right=has_r)
    tensors = (q, k, v, do, dk, dv, tab, acc, rs, best)
    row_major = all(t.is_contiguous() for t in tensors)
    if dense is None:
        dense = row_major
    elif dense and not row_major:
        raise AttentionError("fused_kernel: a launch by pointers takes row-major tensors only")
    args = [*_fused_tensors(tensors, dense), Float32(scale), Float32(scale * LOG2E), Int32(win_l), Int32(win_r)]
    stream = _stream(q)
    key = ("fused", q.dtype, d, q.device.type, tuple(sorted(flags.items())), dense)
    compiled = _CACHE.get(key)
    if compiled is None:
        kernel = FlashBwdFusedSm90(_cute_dtype(q.dtype), d, **flags)
        compiled = cute.compile(kernel.call_dense if dense else kernel, *args, stream)
        _CACHE[key] = compiled
    compiled(*args, stream)


def _dq_tiles(d: int) -> dict:
    """dQ tiles: 128 queries (two math warpgroups) by 64 keys a step (dQ, S and dP in registers; 2 or 3
    stages measured alike)."""
    return {"tile_m": 128, "tile_n": 64, "stages": 2 if d > 64 else 3}


def dq_backward(q, k, v, do, tab, dq, has_dlse: bool, scale: float, softcap: float | None, window) -> None:
    """dQ by the CuTe kernel from the statistics table (compiled once per dtype, head dim, masks)."""
    d = q.shape[3]
    win_l, win_r, has_l, has_r = _window_args(window)
    qk_scale, cap_scale, cap_log2 = _scales(scale, softcap)
    flags = dict(_dq_tiles(d), has_left=has_l, has_right=has_r, softcap=softcap is not None,
                 reverse=has_r and win_r <= 0, has_dlse=has_dlse)
    args = [_to_cute(q), _to_cute(k), _to_cute(v), _to_cute(do), _to_cute(dq), _to_cute(tab),
            Float32(scale), Float32(qk_scale), Float32(cap_scale), Float32(cap_log2), Int32(win_l), Int32(win_r)]
    stream = _stream(q)
    key = ("dq", q.dtype, d, q.device.type, tuple(sorted(flags.items())))
    compiled = _CACHE.get(key)
    if compiled is None:
        compiled = cute.compile(FlashBwdDqSm90(_cute_dtype(q.dtype), d, **flags), *args, stream)
        _CACHE[key] = compiled
    compiled(*args, stream)


def attention_backward(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                       stats: torch.Tensor, dlse: torch.Tensor | None, scale: float, softcap: float | None,
                       window: tuple[int | None, int | None]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) by the two CuTe kernels, both reading one table of the forward's statistics and delta."""
    _check_cute(q, k, v)
    q, k, v, out = (_tma_ready(t) for t in (q, k, v, out))
    do = _tma_ready(do.to(q.dtype))
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    if q.numel() == 0 or k.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    tab = _stats_table(do, out, stats, None if dlse is None else dlse.float())
    if _fused_applies(softcap):
        fused_backward(q, k, v, do, tab, dq, dk, dv, scale, window)
        return dq, dk, dv
    dkdv_backward(q, k, v, do, tab, dk, dv, scale, softcap, window)
    dq_backward(q, k, v, do, tab, dq, dlse is not None, scale, softcap, window)
    return dq, dk, dv


def _backward_any(do, q, k, v, out, stats, dlse, scale, softcap, window):
    """The CuTe backward where it applies (CUDA, CUTE_BACKWARD), else the Triton one."""
    if CUTE_BACKWARD and q.is_cuda:
        return attention_backward(do, q, k, v, out, stats, dlse, scale, softcap, window)
    return _bwd_launch(do, q, k, v, out, stats, dlse, None, None, q.shape[1], k.shape[1], scale, softcap, window)


# ------------------------------------------------------------------------------------ custom ops


def _fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float | None,
              window_left: int | None, window_right: int | None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if q.is_cuda:
        return attention_forward(q, k, v, scale, softcap, (window_left, window_right))
    return attention_cpu(q, k, v, None, None, scale, softcap, (window_left, window_right))


def _fwd_fake(q, k, v, scale, softcap, window_left, window_right):
    shape = (q.shape[0], q.shape[2], q.shape[1])
    return (torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty(shape, dtype=torch.float32),
            q.new_empty((2, *shape), dtype=torch.float32))


def _bwd_impl(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
              lse: torch.Tensor, stats: torch.Tensor, dlse: torch.Tensor | None, scale: float, softcap: float | None,
              window_left: int | None, window_right: int | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    window = (window_left, window_right)
    if q.is_cuda:
        return _backward_any(do, q, k, v, out, stats, dlse, scale, softcap, window)
    return attention_cpu_backward(do, q, k, v, out, lse, dlse, None, None, scale, softcap, window)


def _bwd_fake(do, q, k, v, out, lse, stats, dlse, scale, softcap, window_left, window_right):
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))


def _setup(ctx, inputs, output) -> None:
    q, k, v, *options = inputs
    out, lse, stats = output
    ctx.save_for_backward(q, k, v, out, lse, stats)
    ctx.options = tuple(options)
    ctx.set_materialize_grads(False)


def _backward(ctx, dout, dlse, _dstats):
    q, k, v, out, lse, stats = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    dq, dk, dv = torch.ops.kernelagent.attention_cute_bwd(dout, q, k, v, out, lse, stats, dlse, *ctx.options)
    return dq, dk, dv, None, None, None, None


def _register(name: str, impl, fake, backward=None, setup=None):
    """`impl` as the custom op `kernelagent::<name>` with a fake and, given one, a backward; once per
    process (another copy of this file, imported by path, reuses it)."""
    if hasattr(torch.ops.kernelagent, name):
        return getattr(torch.ops.kernelagent, name)
    op = torch.library.custom_op(f"kernelagent::{name}", impl, mutates_args=())
    op.register_fake(fake)
    if backward is not None:
        op.register_autograd(backward, setup_context=setup)
    return op


# (out, lse, stats) by the CuTe forward; differentiable (the CuTe backward)
attention_cute_fwd = _register("attention_cute_fwd", _fwd_impl, _fwd_fake, _backward, _setup)
attention_cute_bwd = _register("attention_cute_bwd", _bwd_impl, _bwd_fake)


# ------------------------------------------------------------------------------------ public API


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None,
              softcap: float | None = None, window: tuple[int, int] | None = None, return_lse: bool = False):
    """Same contract as triton.py's `attention` (bottom-right causal, window, softcap, GQA, lse),
    forward and backward by the CuTe kernels (head dims 64 and 128)."""
    left, right = _window(causal, window)
    scale, cap = _scale_and_cap(q, scale, softcap)
    if q.is_cuda and not torch.compiler.is_compiling():  # eager on the GPU: the same calls, no dispatcher
        out, lse, _ = _EagerAttention.apply(q, k, v, scale, cap, left, right)
    else:
        out, lse, _ = torch.ops.kernelagent.attention_cute_fwd(q, k, v, scale, cap, left, right)
    return (out, lse) if return_lse else out


class _EagerAttention(torch.autograd.Function):
    """What the custom op attention_cute_fwd computes on the GPU, forward and backward, without the op
    dispatcher: `attention` takes it in eager mode on the GPU, the op under torch.compile (and for meta or
    CPU tensors). The dispatcher cost the host 197 against 163 µs a forward and 1327 against 1060 µs a
    forward+backward at (32, 512, 16, 128) (benchmarks/results/2026-12-04-h200/attention_host_cost_parts.json)."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float | None,
                left: int | None, right: int | None):
        out, lse, stats = attention_forward(q, k, v, scale, softcap, (left, right))
        ctx.save_for_backward(q, k, v, out, stats)
        ctx.options = (scale, softcap, (left, right))
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(stats)
        return out, lse, stats

    @staticmethod
    def backward(ctx, dout, dlse, _dstats):
        q, k, v, out, stats = ctx.saved_tensors
        dout = torch.zeros_like(out) if dout is None else dout
        dq, dk, dv = _backward_any(dout, q, k, v, out, stats, dlse, *ctx.options)
        return dq, dk, dv, None, None, None, None


# -------------------------------------------------------------------------------------- ModelNew


class _AttentionFunction(torch.autograd.Function):
    """The kernels without the op dispatcher, for ModelNew (the verifier checks them directly)."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float | None,
                window: tuple[int | None, int | None]) -> torch.Tensor:
        out, _, stats = attention_forward(q, k, v, scale, softcap, window)
        ctx.save_for_backward(q, k, v, out, stats)
        ctx.options = (scale, softcap, window)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, stats = ctx.saved_tensors
        scale, softcap, window = ctx.options
        dq, dk, dv = _backward_any(dout, q, k, v, out, stats, None, scale, softcap, window)
        return dq, dk, dv, None, None, None


class ModelNew(nn.Module):
    """Matches reference.py's Model: the options come with the inputs; layout "bhsd" takes q, k, v and gives the
    output in SDPA's (B, H, S, D), as (B, S, H, D) views for the kernels."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                scale: float | None = None, softcap: float | None = None,
                window: tuple[int, int] | None = None, layout: str = "bshd") -> torch.Tensor:
        if layout not in ("bshd", "bhsd"):
            raise AttentionError(f"attention: layout must be 'bshd' or 'bhsd', got {layout!r}")
        if layout == "bhsd":
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scale, cap = _scale_and_cap(q, scale, softcap)
        out = _AttentionFunction.apply(q, k, v, scale, cap, _window(causal, window))
        return out.transpose(1, 2) if layout == "bhsd" else out
