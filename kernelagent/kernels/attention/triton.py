"""Flash attention in Triton, forward and backward, (B, S, H, D) layout, registered as torch custom ops.

Forward (FA2 with Hopper habits): one program per (query block, batch x head); Q stays on chip, K/V
tiles stream through TMA (device-side tensor descriptors) and the online softmax runs in the log2
domain (exp2, with log2(e) folded into the scale). The key blocks of a query block are walked in
three phases: blocks cut by the left window edge (masked), blocks every query sees (no mask at all),
then blocks cut by the causal diagonal / right window edge / the last partial block (masked), so
the masks cost only where a block straddles an edge. Causal grids run the heaviest query blocks
first. The log-sum-exp is kept (natural log, +inf for a query that sees no key, as FlashAttention).

Backward: a preprocess kernel writes delta = rowsum(dO * O) - dlse;
then two kernels without atomics (deterministic), both recomputing P from the forward's statistics:
dK/dV, one program per (key block, batch x kv-head) keeping K, V and the dK, dV accumulators on
chip and walking the query blocks of every query head of its group (GQA); dQ, one program per
(query block, batch x head) shaped as the forward, writing dQ once, centred per row on a key the row
attends strongly.

Conventions are reference.py's: bottom-right aligned causal mask and window, query head h reads kv
head h // (Hq // Hkv), softcap * tanh(s / softcap) after scaling, zeros for a query with no key.
Variable-length batches (`attention_varlen`) take packed (total, H, D) tensors and cumulative
sequence lengths, as FlashAttention's varlen API. The CPU implementation of the ops is plain torch
math in fp32 (`attention_cpu`); under TRITON_INTERPRET=1 the kernels run there instead (plain
pointer loads for layouts TMA cannot take). Order: the block shared with cute.py (constants, backward
kernels and launcher, CPU math) -> forward settings, kernels, launcher -> custom ops -> public API -> ModelNew.
"""

from __future__ import annotations

import functools

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

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


# ------------------------------------------------------------------------------- forward settings

# (BLOCK_M, BLOCK_N, warps, stages, warp-specialised, widest head dim). Registers and shared memory
# checked by compiling for sm_90a (tests/kernels/test_attention.py): at head dim 128, 128x128 with 8
# warps holds 189 registers (220 with 3 stages, 225 KiB of shared memory), 128x64 with 4 warps
# spills; head dim 256 fits only 64-row tiles. Triton 3.6's Hopper warp specialisation partitions
# the loop only with 4 warps and a single loop per kernel (two loops crash its pass); with 3 stages
# and 64-wide key blocks it computed NaN on the H200 (tests/kernels/test_attention_gpu.py), so it is out.
FWD_TABLE = ((128, 128, 8, 2, False, 128), (128, 128, 8, 3, False, 128), (128, 64, 8, 3, False, 128),
             (128, 64, 4, 3, False, 64), (128, 128, 4, 2, True, 128), (128, 64, 4, 2, True, 128),
             (64, 64, 4, 3, False, 256), (64, 64, 4, 2, False, 256), (64, 32, 4, 3, False, 256))


def _fwd_configs() -> list[triton.Config]:
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "WS": ws, "MAX_D": d}, num_warps=w, num_stages=s)
            for bm, bn, w, s, ws, d in FWD_TABLE]


def _fwd_prune(configs, named_args, **kwargs):
    """_prune, and no warp specialisation without TMA: Triton 3.6's pass fails on pointer loads
    (a RuntimeError the autotuner does not catch)."""
    tma = kwargs["TMA"] if "TMA" in kwargs else named_args["TMA"]
    return [c for c in _prune(configs, named_args, **kwargs) if tma or not c.kwargs["WS"]]


# The CPU interpreter runs the UPCAST variant on INTERP_FWD / INTERP_BWD tiles (the same shapes): operands
# widened to fp32 (NumPy has no bf16 matmul), the products of 16-bit values exact in fp32 and summed in
# fp32 (the tensor cores' accumulator type); input_precision="ieee" so the variant's sm_90 compile, which
# the verifier makes of what the interpreter ran, does not round to TF32. The backward recomputes the
# scores with the same expression, q k^T on tiles of the same shapes (the dK/dV kernel transposes the
# result rather than computing k q^T, which NumPy may sum in another order), so P recomputed from the
# forward's statistics sees the forward's scores bit for bit. Not fp64 products: Triton 3.6 cannot lower
# an fp64 tl.dot for sm_90 ("Currently fp64 don't support largeK MMA"). The variant's other dots take
# 16-bit values widened (P and dS rounded to the input dtype first), which TF32 holds exactly.
INTERP_FWD = {"BLOCK_M": 16, "BLOCK_N": 16, "WS": False, "MAX_D": 256}
FWD_DEFAULT = {64: (128, 64, 4, 3), 128: (128, 64, 8, 3), 256: (64, 64, 4, 2)}  # untuned: small problems


# -------------------------------------------------------------------------------- forward kernels

# Query rows: never m0 + tl.arange(0, BLOCK_M). Triton 3.6's Hopper warp specialisation gives each of
# two consumer warpgroups 64 rows of a 128-row block and turns that expression, for the second, into
# (m0 + 64) + [64, 128): rows 128..191. TMA coordinates come out right (so O does), but that
# warpgroup's causal/window mask is 64 rows off and its log-sum-exp and softmax statistics land 64
# rows too far (the H200 saw wrong lse and dQ, non-causal, autotuned). Written instead: pointers
# advanced by the scalar m0 plus local_m, and mask bounds local_m + (m0 + ...), which compile right;
# tests/kernels/test_attention.py checks the compiled IR.


@triton.jit
def _fwd_phase(acc, l_i, m_i, q, k_desc, v_desc, k_base, v_base, sk_s, sv_s, start, end, m0, sk, off,
               qk_scale, cap_scale, cap_log2, win_left, win_right,
               MASK: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr,
               TMA: tl.constexpr, UPCAST: tl.constexpr, WS: tl.constexpr, EVEN_K: tl.constexpr, HEAD_D: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """Online softmax over key blocks [start, end) (block indices); MASK applies the window, the
    causal diagonal and (unless EVEN_K: whole key blocks) the key-length mask element-wise. Scores stay
    raw (q.k) and the scale enters the exponent, exp2((s - max) * qk_scale): s - max is exact, so P does
    not inherit the rounding of scores near 1e4 (with a softcap the scores are bounded and kept in log2
    units). Query rows are m0 + local_m (see the note above)."""
    dtype = k_base.dtype.element_ty
    local_m = tl.arange(0, BLOCK_M)
    cols_d = tl.arange(0, BLOCK_D)
    for n_blk in tl.range(start, end, warp_specialize=WS):
        n0 = n_blk * BLOCK_N
        cols = n0 + tl.arange(0, BLOCK_N)
        if TMA:
            k = k_desc.load([n0, 0])
        else:
            kv_mask = (cols[:, None] < sk) & (cols_d[None, :] < HEAD_D)
            k = tl.load(k_base + cols[:, None].to(tl.int64) * sk_s + cols_d[None, :], mask=kv_mask, other=0.0)
        if UPCAST:  # the interpreter's variant (see INTERP_FWD)
            k = k.to(tl.float32)
            qk = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            qk = tl.dot(q, tl.trans(k))
        if SOFTCAP:
            s = cap_log2 * _tanh(qk * cap_scale)
            factor = 1.0
        else:
            s = qk
            factor = qk_scale
        if MASK:  # key j against query m0 + i, bounds local_m + (m0 + ...) (the note above)
            if EVEN_K and HAS_RIGHT:  # every key block whole: the window's bounds alone
                keep = cols[None, :] <= (local_m + (m0 + off + win_right))[:, None]
            else:
                keep = cols[None, :] < sk
                if HAS_RIGHT:
                    keep &= cols[None, :] <= (local_m + (m0 + off + win_right))[:, None]
            if HAS_LEFT:
                keep &= cols[None, :] >= (local_m + (m0 + off - win_left))[:, None]
            s = tl.where(keep, s, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_use = tl.where(m_new == -float("inf"), 0.0, m_new)  # a row with nothing seen yet: no NaN
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_use = m_new
        p = tl.math.exp2((s - m_use[:, None]) * factor)
        alpha = tl.math.exp2((m_i - m_use) * factor)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if TMA:
            v = v_desc.load([n0, 0])
        else:
            v = tl.load(v_base + cols[:, None].to(tl.int64) * sv_s + cols_d[None, :], mask=kv_mask, other=0.0)
        if UPCAST:
            acc = tl.dot(p.to(dtype).to(tl.float32), v.to(tl.float32), acc)
        else:
            acc = tl.dot(p.to(dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_kernel(Q, K, V, Out, LSE, STATS, CU_Q, CU_K,
                     sq_b, sq_s, sq_h, sk_b, sk_s, sk_h, sv_b, sv_s, sv_h, so_b, so_s, so_h, sl_b, sl_h, st_plane,
                     seqlen_q, seqlen_k, n_heads, group, qk_scale, cap_scale, cap_log2, win_left, win_right,
                     BUCKET_Q, BUCKET_K,
                     HEAD_D: tl.constexpr, BLOCK_D: tl.constexpr, VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr,
                     HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr, TMA: tl.constexpr, UPCAST: tl.constexpr,
                     REVERSE: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     WS: tl.constexpr, MAX_D: tl.constexpr):
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
        dtype = Q.dtype.element_ty
        b64 = b.to(tl.int64)
        q_base = Q + b64 * sq_b + q_start.to(tl.int64) * sq_s + h * sq_h
        k_base = K + b64 * sk_b + k_start.to(tl.int64) * sk_s + hk * sk_h
        v_base = V + b64 * sv_b + k_start.to(tl.int64) * sv_s + hk * sv_h
        o_base = Out + b64 * so_b + q_start.to(tl.int64) * so_s + h * so_h
        local_m = tl.arange(0, BLOCK_M)  # rows m0 + local_m (the note above)
        row_ok = local_m < sq - m0
        cols_d = tl.arange(0, BLOCK_D)
        q_desc = 0
        k_desc = 0
        v_desc = 0
        o_desc = 0
        if TMA:
            q_desc = tl.make_tensor_descriptor(q_base, [sq, HEAD_D], [sq_s, 1], [BLOCK_M, BLOCK_D])
            k_desc = tl.make_tensor_descriptor(k_base, [sk, HEAD_D], [sk_s, 1], [BLOCK_N, BLOCK_D])
            v_desc = tl.make_tensor_descriptor(v_base, [sk, HEAD_D], [sv_s, 1], [BLOCK_N, BLOCK_D])
            o_desc = tl.make_tensor_descriptor(o_base, [sq, HEAD_D], [so_s, 1], [BLOCK_M, BLOCK_D])
            q = q_desc.load([m0, 0])
        else:
            q_mask = row_ok[:, None] & (cols_d[None, :] < HEAD_D)
            q_rows = q_base + m0.to(tl.int64) * sq_s + local_m[:, None].to(tl.int64) * sq_s
            q = tl.load(q_rows + cols_d[None, :], mask=q_mask, other=0.0)
        if UPCAST:
            q = q.to(tl.float32)

        # key blocks: [n_lo, f_lo) masked | [f_lo, f_hi) seen by every query | [f_hi, n_hi) masked
        off, n_lo, f_lo, f_hi, n_hi = _key_blocks(m0, sq, sk, win_left, win_right, HAS_LEFT, HAS_RIGHT, BLOCK_M,
                                                  BLOCK_N)

        m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        if WS:  # Triton 3.6's Hopper warp specialisation takes one loop (and gives up on a branch in it): every
            # block masked (with whole key blocks, EVEN_K, by the causal/window bounds alone), or none when
            # nothing is windowed and every key block is whole
            acc, l_i, m_i = _fwd_phase(acc, l_i, m_i, q, k_desc, v_desc, k_base, v_base, sk_s, sv_s, n_lo, n_hi, m0,
                                       sk, off, qk_scale, cap_scale, cap_log2, win_left, win_right,
                                       HAS_LEFT or HAS_RIGHT or not EVEN_K, HAS_LEFT, HAS_RIGHT, SOFTCAP, TMA,
                                       UPCAST, True, EVEN_K, HEAD_D, BLOCK_M, BLOCK_N, BLOCK_D)
        else:
            if HAS_LEFT:
                acc, l_i, m_i = _fwd_phase(acc, l_i, m_i, q, k_desc, v_desc, k_base, v_base, sk_s, sv_s, n_lo, f_lo,
                                           m0, sk, off, qk_scale, cap_scale, cap_log2, win_left, win_right, True,
                                           HAS_LEFT, HAS_RIGHT, SOFTCAP, TMA, UPCAST, False, EVEN_K, HEAD_D, BLOCK_M,
                                           BLOCK_N, BLOCK_D)
            acc, l_i, m_i = _fwd_phase(acc, l_i, m_i, q, k_desc, v_desc, k_base, v_base, sk_s, sv_s, f_lo, f_hi, m0,
                                       sk, off, qk_scale, cap_scale, cap_log2, win_left, win_right, False, HAS_LEFT,
                                       HAS_RIGHT, SOFTCAP, TMA, UPCAST, False, EVEN_K, HEAD_D, BLOCK_M, BLOCK_N,
                                       BLOCK_D)
            acc, l_i, m_i = _fwd_phase(acc, l_i, m_i, q, k_desc, v_desc, k_base, v_base, sk_s, sv_s, f_hi, n_hi, m0,
                                       sk, off, qk_scale, cap_scale, cap_log2, win_left, win_right, True, HAS_LEFT,
                                       HAS_RIGHT, SOFTCAP, TMA, UPCAST, False, EVEN_K, HEAD_D, BLOCK_M, BLOCK_N,
                                       BLOCK_D)

        empty = l_i == 0.0  # a query that sees no key: output 0, lse +inf (P = 0 in the backward)
        out = acc / tl.where(empty, 1.0, l_i)[:, None]
        m_keep = tl.where(empty, 0.0, m_i)  # raw scores (log2 units with a softcap)
        l_keep = tl.where(empty, float("inf"), tl.math.log2(tl.where(empty, 1.0, l_i)))
        at = b64 * sl_b + h * sl_h + q_start + m0  # scalar; the rows are local_m past it
        if SOFTCAP:
            tl.store(LSE + at + local_m, (m_keep + l_keep) * _LN2_C, mask=row_ok)
        else:
            tl.store(LSE + at + local_m, (m_keep * qk_scale + l_keep) * _LN2_C, mask=row_ok)
        tl.store(STATS + at + local_m, m_keep, mask=row_ok)  # kept apart for the backward (see _bwd_head)
        tl.store(STATS + st_plane + at + local_m, l_keep, mask=row_ok)
        if TMA:
            o_desc.store([m0, 0], out.to(dtype))
        else:
            o_rows = o_base + m0.to(tl.int64) * so_s + local_m[:, None].to(tl.int64) * so_s
            tl.store(o_rows + cols_d[None, :], out.to(dtype), mask=q_mask)


_FWD = _attn_fwd_kernel if INTERPRETING else triton.autotune(
    _fwd_configs(), key=["BUCKET_Q", "BUCKET_K", "BLOCK_D", "HAS_LEFT", "HAS_RIGHT", "SOFTCAP", "VARLEN", "TMA",
                          "EVEN_K"],
    prune_configs_by={"early_config_prune": _fwd_prune}, do_bench=_tuning_bench)(_attn_fwd_kernel)


# -------------------------------------------------------------------------------- forward launcher


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, varlen: bool, cpu: bool = False) -> None:
    dims = 3 if varlen else 4
    if q.dim() != dims or k.dim() != dims or v.dim() != dims:
        layout = "(total, H, D)" if varlen else "(B, S, H, D)"
        raise AttentionError(f"attention: q, k, v must be {layout}; got {tuple(q.shape)}, {tuple(k.shape)}, "
                             f"{tuple(v.shape)}")
    if k.shape != v.shape or q.shape[-1] != k.shape[-1] or (not varlen and q.shape[0] != k.shape[0]):
        raise AttentionError(f"attention: k and v must match and share q's batch and head dim; got "
                             f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    hq, hkv = q.shape[-2], k.shape[-2]
    if hkv == 0 or hq % hkv:
        raise AttentionError(f"attention: query heads ({hq}) must be a multiple of key/value heads ({hkv})")
    allowed = (torch.float16, torch.bfloat16) + ((torch.float32, torch.float64) if cpu else ())
    if q.dtype not in allowed or k.dtype != q.dtype or v.dtype != q.dtype:
        raise AttentionError(f"attention: q, k, v must share one of {[str(d) for d in allowed]}; got "
                             f"{q.dtype}, {k.dtype}, {v.dtype}")
    if not cpu and q.shape[-1] > 256:
        raise AttentionError(f"attention: head dim up to 256 is supported, got {q.shape[-1]}")


def _fwd_launch(q, k, v, cu_q, cu_k, max_q: int, max_k: int, scale: float, softcap: float | None,
                window) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out, lse, stats) for (B, S, H, D) tensors, or packed (T, H, D) ones when cu_q is given; stats
    holds the row max and log2 row sum (log2 units) the backward needs."""
    varlen = cu_q is not None
    if not scale > 0:
        raise AttentionError(f"attention: the softmax scale must be positive, got {scale}")
    q, k, v = _unit_last(q), _unit_last(k), _unit_last(v)
    d = q.shape[-1]
    hq, hkv = q.shape[-2], k.shape[-2]
    batch = cu_q.shape[0] - 1 if varlen else q.shape[0]
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    shape = (hq, q.shape[0]) if varlen else (q.shape[0], hq, q.shape[1])
    lse = torch.empty(shape, dtype=torch.float32, device=q.device)
    stats = torch.empty((2, *shape), dtype=torch.float32, device=q.device)
    sl = (0, lse.stride(0)) if varlen else (lse.stride(0), lse.stride(1))
    if batch == 0 or max_q == 0 or q.numel() == 0:
        stats[0].zero_()
        stats[1].fill_(float("inf"))
        return out, lse.fill_(float("inf")), stats
    tma = _tma_ok(q, k, v, out)
    if tma and q.is_cuda:
        _ensure_tma_allocator()
    win_l, win_r, has_l, has_r = _window_args(window)
    qk_scale, cap_scale, cap_log2 = _scales(scale, softcap)
    dummy = cu_q if varlen else lse
    tuned = not INTERPRETING and max_q * max_k >= TUNE_MIN
    blocks = INTERP_FWD if INTERPRETING else {} if tuned else _fixed(FWD_DEFAULT, _block_d(d), WS=False)
    causal_like = has_r and win_r <= 0

    def grid(meta):
        return (triton.cdiv(max_q, meta["BLOCK_M"]), batch * hq)

    kernel = _FWD if tuned else _attn_fwd_kernel
    kernel[grid](q, k, v, out, lse, stats, dummy, cu_k if varlen else dummy,
               *_strides(q, varlen), *_strides(k, varlen), *_strides(v, varlen), *_strides(out, varlen), *sl,
               stats.stride(0), max_q, max_k, hq, hq // hkv, qk_scale, cap_scale, cap_log2, win_l, win_r,
               _bucket(max_q), _bucket(max_k), HEAD_D=d, BLOCK_D=_block_d(d), VARLEN=varlen, HAS_LEFT=has_l,
               HAS_RIGHT=has_r, SOFTCAP=softcap is not None, TMA=tma, UPCAST=INTERPRETING, REVERSE=causal_like,
               EVEN_K=_even_keys(varlen, max_k), **blocks)
    return out, lse, stats


# ---------------------------------------------------------------------------------- custom ops


def _on_kernels(t: torch.Tensor) -> bool:
    return t.is_cuda or INTERPRETING


def _fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor | None,
              cu_seqlens_k: torch.Tensor | None, max_seqlen_q: int, max_seqlen_k: int, scale: float,
              softcap: float | None, window_left: int | None, window_right: int | None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    window = (window_left, window_right)
    varlen = cu_seqlens_q is not None
    if _on_kernels(q):
        _check(q, k, v, varlen)
        return _fwd_launch(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale, softcap, window)
    _check(q, k, v, varlen, cpu=True)
    return attention_cpu(q, k, v, cu_seqlens_q, cu_seqlens_k, scale, softcap, window)


def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale, softcap, window_left,
              window_right):
    shape = (q.shape[-2], q.shape[0]) if cu_seqlens_q is not None else (q.shape[0], q.shape[2], q.shape[1])
    return (torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty(shape, dtype=torch.float32),
            q.new_empty((2, *shape), dtype=torch.float32))


def _bwd_impl(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
              lse: torch.Tensor, stats: torch.Tensor, dlse: torch.Tensor | None, cu_seqlens_q: torch.Tensor | None,
              cu_seqlens_k: torch.Tensor | None, max_seqlen_q: int, max_seqlen_k: int, scale: float,
              softcap: float | None, window_left: int | None, window_right: int | None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    window = (window_left, window_right)
    args = (cu_seqlens_q, cu_seqlens_k)
    if _on_kernels(q):
        return _bwd_launch(do, q, k, v, out, stats, dlse, *args, max_seqlen_q, max_seqlen_k, scale, softcap, window)
    return attention_cpu_backward(do, q, k, v, out, lse, dlse, *args, scale, softcap, window)


def _bwd_fake(do, q, k, v, out, lse, stats, dlse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale,
              softcap, window_left, window_right):
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))


def _setup(ctx, inputs, output) -> None:
    q, k, v, cu_q, cu_k, max_q, max_k, scale, softcap, win_l, win_r = inputs
    out, lse, stats = output
    ctx.save_for_backward(q, k, v, out, lse, stats, cu_q, cu_k)
    ctx.options = (max_q, max_k, scale, softcap, win_l, win_r)
    ctx.set_materialize_grads(False)


def _backward(ctx, dout, dlse, _dstats):
    q, k, v, out, lse, stats, cu_q, cu_k = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    dq, dk, dv = torch.ops.kernelagent.attention_bwd(dout, q, k, v, out, lse, stats, dlse, cu_q, cu_k,
                                                     *ctx.options)
    return dq, dk, dv, None, None, None, None, None, None, None, None


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


# (out, lse, stats) of attention over (B, S, H, D) or packed varlen tensors; differentiable in q, k, v
# (and lse); stats (the row max and log2 row sum) are for the backward
attention_fwd = _register("attention_fwd", _fwd_impl, _fwd_fake, _backward, _setup)
# (dq, dk, dv) from dout, the saved output, lse (CPU path) and stats (kernels), and dlse (or None)
attention_bwd = _register("attention_bwd", _bwd_impl, _bwd_fake)


def _attention_fwd(q, k, v, cu_q, cu_k, max_q: int, max_k: int, scale: float, softcap: float | None,
                   left: int | None, right: int | None):
    """(out, lse, stats), differentiable: the custom op attention_fwd under torch.compile (and for meta
    tensors, or CPU ones without the interpreter); in eager mode on the kernels the same calls without the
    op dispatcher (_EagerAttention), which costs the host more than the launches at short sequences."""
    on_kernels = q.is_cuda or (INTERPRETING and q.device.type == "cpu")  # not meta: the op's fake serves those
    if on_kernels and not torch.compiler.is_compiling():
        return _EagerAttention.apply(q, k, v, cu_q, cu_k, max_q, max_k, scale, softcap, left, right)
    return torch.ops.kernelagent.attention_fwd(q, k, v, cu_q, cu_k, max_q, max_k, scale, softcap, left, right)


class _EagerAttention(torch.autograd.Function):
    """What attention_fwd computes on the kernels (its _fwd_impl and, backward, _bwd_impl's launch), as an
    autograd.Function: the same saved tensors and options (_setup), no dispatcher."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, max_q: int, max_k: int, scale: float, softcap: float | None,
                left: int | None, right: int | None):
        _check(q, k, v, cu_q is not None)
        out, lse, stats = _fwd_launch(q, k, v, cu_q, cu_k, max_q, max_k, scale, softcap, (left, right))
        _setup(ctx, (q, k, v, cu_q, cu_k, max_q, max_k, scale, softcap, left, right), (out, lse, stats))
        ctx.mark_non_differentiable(stats)
        return out, lse, stats

    @staticmethod
    def backward(ctx, dout, dlse, _dstats):
        q, k, v, out, _, stats, cu_q, cu_k = ctx.saved_tensors
        max_q, max_k, scale, softcap, left, right = ctx.options
        dout = torch.zeros_like(out) if dout is None else dout
        dq, dk, dv = _bwd_launch(dout, q, k, v, out, stats, dlse, cu_q, cu_k, max_q, max_k, scale, softcap,
                                 (left, right))
        return dq, dk, dv, None, None, None, None, None, None, None, None


# ---------------------------------------------------------------------------------- public API


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None,
              softcap: float | None = None, window: tuple[int, int] | None = None, return_lse: bool = False):
    """softmax(q k^T * scale) v for q (B, Sq, Hq, D) and k, v (B, Sk, Hkv, D), differentiable.

    causal: bottom-right aligned (query i sees keys j <= i + Sk - Sq); window (left, right), -1 for
    unbounded, on the same alignment; softcap: softcap * tanh(s / softcap) on the scaled scores.
    Returns out (B, Sq, Hq, D), and with return_lse also lse (B, Hq, Sq) fp32 (natural log; +inf
    for a query that sees no key), which is differentiable too. fp16/bf16 on CUDA, any float on CPU.
    """
    left, right = _window(causal, window)
    scale, cap = _scale_and_cap(q, scale, softcap)
    out, lse, _ = _attention_fwd(q, k, v, None, None, q.shape[1], k.shape[1], scale, cap, left, right)
    return (out, lse) if return_lse else out


def attention_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                     cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, *, causal: bool = False,
                     scale: float | None = None, softcap: float | None = None,
                     window: tuple[int, int] | None = None, return_lse: bool = False):
    """attention over packed sequences: q (total_q, Hq, D), k, v (total_k, Hkv, D); sequence b is
    rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] (int32, as FlashAttention's varlen API). Returns out
    (total_q, Hq, D) and with return_lse lse (Hq, total_q)."""
    left, right = _window(causal, window)
    scale, cap = _scale_and_cap(q, scale, softcap)
    _check_cu_seqlens(cu_seqlens_q, cu_seqlens_k, q.shape[0], k.shape[0], int(max_seqlen_q), int(max_seqlen_k))
    cu_q, cu_k = cu_seqlens_q.to(torch.int32), cu_seqlens_k.to(torch.int32)
    out, lse, _ = _attention_fwd(q, k, v, cu_q, cu_k, int(max_seqlen_q), int(max_seqlen_k), scale, cap, left, right)
    return (out, lse) if return_lse else out


def _check_cu_seqlens(cu_q, cu_k, total_q: int, total_k: int, max_q: int, max_k: int) -> None:
    """cu_seqlens as FlashAttention's varlen API takes them: 1-D integer tensors of batch + 1 offsets, one
    length for q and k. Their values (0 first, never falling, none past the packed rows, no sequence longer than
    its max_seqlen) are checked where that costs no device sync: CPU tensors outside torch.compile."""
    for name, cu in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
        if not isinstance(cu, torch.Tensor) or cu.dim() != 1 or cu.shape[0] < 2 or cu.dtype.is_floating_point \
                or cu.dtype.is_complex or cu.dtype == torch.bool:
            got = f"{cu.dtype} {tuple(cu.shape)}" if isinstance(cu, torch.Tensor) else type(cu).__name__
            raise AttentionError(f"attention_varlen: {name} must be a 1-D integer tensor of batch + 1 offsets; "
                                 f"got {got}")
    if cu_q.shape[0] != cu_k.shape[0]:
        raise AttentionError(f"attention_varlen: cu_seqlens_q and cu_seqlens_k must describe as many sequences; got "
                             f"{cu_q.shape[0]} and {cu_k.shape[0]} offsets")
    if torch.compiler.is_compiling():
        return
    for side, cu, total, longest in (("q", cu_q, total_q, max_q), ("k", cu_k, total_k, max_k)):
        if cu.device.type != "cpu":
            continue
        offsets = cu.tolist()
        lengths = [offsets[i + 1] - offsets[i] for i in range(len(offsets) - 1)]
        if offsets[0] != 0 or min(lengths) < 0 or offsets[-1] > total:
            raise AttentionError(f"attention_varlen: cu_seqlens_{side} must rise from 0 to at most the {total} rows "
                                 f"of {side}; got {offsets}")
        if max(lengths) > longest:
            raise AttentionError(f"attention_varlen: a {side} sequence has {max(lengths)} rows, more than "
                                 f"max_seqlen_{side} = {longest}")


class SDPAUnsupported(AttentionError):
    """An F.scaled_dot_product_attention call sdpa() cannot run with these kernels."""


def _sdpa_misfit(query, key, value, attn_mask, dropout_p, enable_gqa, scale=None) -> str | None:
    """Why this call does not fit the kernels, or None; the first misfit of: options, shapes and heads,
    dtype and head dim (a call with several misfits is told the earliest)."""
    if attn_mask is not None:
        return "attn_mask is not supported (use is_causal, or attention(..., window=...))"
    if dropout_p:
        return "dropout_p > 0 is not supported"
    if scale is not None and not 0 < float(scale) < float("inf"):
        return f"scale {scale} is not supported (the kernels take a positive, finite one)"
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return f"(B, H, S, D) tensors expected, got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
    if key.shape != value.shape or query.shape[-1] != key.shape[-1] or query.shape[0] != key.shape[0]:
        return f"shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)} do not fit"
    if query.shape[1] != key.shape[1] and not (enable_gqa and query.shape[1] % key.shape[1] == 0):
        return f"{query.shape[1]} query heads and {key.shape[1]} key heads need enable_gqa=True and a multiple"
    if query.is_cuda and (query.dtype not in (torch.float16, torch.bfloat16) or query.shape[-1] > 256):
        return f"CUDA kernels take fp16/bf16 with head dim <= 256, got {query.dtype} and {query.shape[-1]}"
    if key.dtype != query.dtype or value.dtype != query.dtype:
        return "query, key and value must share a dtype"
    return None


def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None = None,
         dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False, *,
         fallback: bool = False) -> torch.Tensor:
    """Drop-in for F.scaled_dot_product_attention on (B, H, S, D) tensors, with its conventions
    (is_causal is top-left aligned there; converted here). Calls that do not fit (a mask, dropout,
    fp32 on CUDA, ...) raise SDPAUnsupported naming why, or with fallback=True go to PyTorch."""
    why = _sdpa_misfit(query, key, value, attn_mask, dropout_p, enable_gqa, scale)
    if why is not None:
        if fallback:
            return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                                  is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
        raise SDPAUnsupported(f"sdpa: {why}")
    sq, sk = query.shape[2], key.shape[2]
    right = (sq - sk) if is_causal else None  # top-left causal: key j <= query i, i.e. j <= i + off + (sq - sk)
    scale, _ = _scale_and_cap(query, scale, None)
    out, _, _ = _attention_fwd(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), None, None, sq,
                               sk, scale, None, None, right)
    return out.transpose(1, 2)


# ------------------------------------------------------------------------------------ ModelNew


class _AttentionFunction(torch.autograd.Function):
    """The kernels without the op dispatcher, for ModelNew (the verifier checks them directly)."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float | None,
                window: tuple[int | None, int | None]) -> torch.Tensor:
        _check(q, k, v, False)
        out, _, stats = _fwd_launch(q, k, v, None, None, q.shape[1], k.shape[1], scale, softcap, window)
        ctx.save_for_backward(q, k, v, out, stats)
        ctx.options = (scale, softcap, window)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, stats = ctx.saved_tensors
        scale, softcap, window = ctx.options
        dq, dk, dv = _bwd_launch(dout, q, k, v, out, stats, None, None, None, q.shape[1], k.shape[1], scale, softcap,
                                 window)
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
