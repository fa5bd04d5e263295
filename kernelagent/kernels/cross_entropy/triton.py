"""Cross-entropy over the last dimension in Triton, forward and backward, with every option training
code uses: class weights, ignore_index, mean/sum/none, label smoothing, z-loss and logit soft-capping.

Per row r with target t (rows whose target is ignore_index, or outside [0, V), are left out), logits
x' = softcap * tanh(x / softcap) (or x), lse = logsumexp(x'), class weights w (else 1), W = sum(w):
    loss_r = w_t (1 - eps) (lse - x'_t) + (eps / V) (W lse - sum_c w_c x'_c) + z lse^2
    dloss_r/dx'_c = p_c (w_t (1 - eps) + eps W / V + 2 z lse) - w_t (1 - eps) [c = t] - eps w_c / V
('mean' divides by the kept rows' sum of w_t, as F.cross_entropy does; all rows left out gives NaN.)

Kernels: one program per row (or persistent programs) for the forward: an online logsumexp in one
read of the row, each thread keeping a running max and sum per 128-bit slice (no cross-thread work
until the row ends), exp as exp2 of a pre-scaled argument (FFMA + MUFU.EX2); options that are off are
constexpr and compile out. Optionally the same program writes the gradient, in a second sweep that
runs backwards over the row so that it re-reads what is still in L2 (the first sweep's loads are
marked evict_last, the second's and the gradient's stores evict_first; the fused config runs one
persistent program per SM so that the rows in flight, 132 x 250 KB at V = 128256 bf16, fit in L2).
A setup kernel (denominator and W) runs before the rows only where they need it; otherwise the
fixed-order reduction after them also counts the kept rows (no atomics: deterministic). The same row
kernel is the backward that re-reads the logits; an in-place scale, skipped where dloss is 1. With a
gradient needed and reduction mean/sum, the forward writes the gradient for dloss = 1 (into new
memory, or into the logits' storage with inplace_backward=True) and the backward only scales it: one
DRAM read and one write of the logits in all when the second sweep hits L2.

Paths: eager calls on CUDA (or under TRITON_INTERPRET=1) go straight to the kernels through an
autograd.Function, as ModelNew does; torch.compile, CPU and meta tensors go through the registered
custom ops, whose CPU implementation is plain torch. Order: kernels -> launchers -> kernel paths ->
CPU path -> custom ops -> autograd -> public API -> modules.
"""

from __future__ import annotations

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}
# (columns per step for 16-bit logits, fp32 takes half; warps; programs per SM, 0 = one program per
# row). Chosen from benchmarks/losses_peers.py's ce_sweep on an H200 (2026-12-02, bf16 [8192, 128256],
# benchmarks/results/2026-12-02-h200/losses_peers.json): forward 16384 x 8 (0.488 ms; 8192 x 8 0.485,
# 16384 x 16 0.503, 32768 x 16 0.610); fused forward+backward one program per row, 16384 x 8 (1.315 ms:
# 16384 x 16 was 1.5 % faster at 1.295 ms but spills 8 bytes in the fused mode; one program per SM with
# 32 warps 1.371, 8192 columns 1.44-1.49).
CONFIGS = {"fwd": (16384, 8, 0), "fused": (16384, 8, 0), "bwd": (8192, 16, 0)}
SCALE_BLOCK = 8192
SCALE_PROGRAMS_PER_SM = 16  # _scale_kernel's programs (rows strided over them) per SM
SETUP_BLOCK = 4096


# ------------------------------------------------------------------------------------- kernels


@triton.jit
def _capped(x, cap):
    """cap * tanh(x / cap) in fp32, from exp(-2|y|) so that it neither overflows nor needs libdevice."""
    y = x / cap
    e = tl.exp2(-2.8853900817779268 * tl.abs(y))  # exp(-2|y|)
    th = (1.0 - e) / (1.0 + e)
    return cap * tl.where(y < 0.0, -th, th)


@triton.jit
def _ce_setup_kernel(target_ptr, weight_ptr, denom_ptr, wsum_ptr, n_rows, n_cols, ignore_index,
                     HAS_WEIGHT: tl.constexpr, NEED_WSUM: tl.constexpr, BLOCK: tl.constexpr):
    """denom = sum of w_t over kept rows (their count without weights); wsum = sum of all w."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_rows, BLOCK):
        mask = start + offs < n_rows
        t = tl.load(target_ptr + start + offs, mask=mask, other=ignore_index).to(tl.int64)
        kept = mask & (t != ignore_index) & (t >= 0) & (t < n_cols)
        if HAS_WEIGHT:
            acc += tl.load(weight_ptr + tl.where(kept, t, 0), mask=kept, other=0.0).to(tl.float32)
        else:
            acc += tl.where(kept, 1.0, 0.0)
    tl.store(denom_ptr, tl.sum(acc, axis=0))
    if NEED_WSUM:
        wacc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            mask = start + offs < n_cols
            wacc += tl.load(weight_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(wsum_ptr, tl.sum(wacc, axis=0))


@triton.jit
def _ce_kernel(logits_ptr, target_ptr, weight_ptr, denom_ptr, wsum_ptr, loss_ptr, lse_ptr, dloss_ptr, grad_ptr,
               n_rows, n_cols, stride, grad_stride, ignore_index, eps, z, cap, HAS_WEIGHT: tl.constexpr,
               SMOOTH: tl.constexpr, HAS_Z: tl.constexpr, HAS_SOFTCAP: tl.constexpr, MODE: tl.constexpr,
               REDUCTION: tl.constexpr, BLOCK: tl.constexpr):
    """Rows of the cross-entropy, one per program (or strided over fewer, persistent programs).

    MODE 0: loss (fp32) and logsumexp, one read of the row.
    MODE 1: the same, then dloss/dlogits for dloss = 1 in a second sweep that walks the row from its
            end (the blocks read last are the likeliest to still be in L2); grad_ptr may be logits_ptr.
    MODE 2: dlogits from the saved logsumexp, times dloss (REDUCTION 0: one per row; 1: sum; 2: mean).
    The read sweep sees a block as [BLOCK / VEC, VEC]: each thread keeps a running max and rescaled sum
    for each of its VEC-wide slices (one 128-bit load each), so the loop has no cross-thread reduction
    and no barrier; the row's slices are combined once at its end. exp is exp2 of a pre-scaled
    argument (one FFMA and one MUFU.EX2 with ftz; tl.exp adds a multiply and a denormal fix-up).
    Options that are off are constexpr and compile out. Nested @jit helpers are avoided on purpose: the
    CPU interpreter pays ~30 ms for each call.
    """
    LOG2E: tl.constexpr = 1.4426950408889634
    VEC: tl.constexpr = 128 // logits_ptr.dtype.element_ty.primitive_bitwidth  # one 128-bit load
    SLICES: tl.constexpr = BLOCK // VEC
    tile = tl.arange(0, SLICES)[:, None] * VEC + tl.arange(0, VEC)[None, :]  # [SLICES, VEC] offsets
    cols = tl.arange(0, BLOCK)
    wsum = n_cols * 1.0
    if SMOOTH and HAS_WEIGHT:
        wsum = tl.load(wsum_ptr)
    pid, n_programs = tl.program_id(0).to(tl.int64), tl.num_programs(0)
    for i in range(0, tl.cdiv(n_rows - pid, n_programs)):
        row = pid + i * n_programs
        row_ptr = logits_ptr + row * stride
        t = tl.load(target_ptr + row).to(tl.int64)
        kept = (t != ignore_index) & (t >= 0) & (t < n_cols)
        t = tl.where(kept, t, 0)
        wt = tl.full([], 1.0, tl.float32)
        if HAS_WEIGHT:
            wt = tl.load(weight_ptr + t).to(tl.float32)
        if MODE == 2:
            lse = tl.load(lse_ptr + row)
            scale = tl.load(dloss_ptr + row).to(tl.float32) if REDUCTION == 0 else tl.load(dloss_ptr).to(tl.float32)
            if REDUCTION == 2:
                scale = scale / tl.load(denom_ptr)
        else:
            m = tl.full([SLICES], -float("inf"), tl.float32)  # running max of each slice
            s = tl.zeros([SLICES], tl.float32)  # running sum of exp(x - m) of each slice
            sx = tl.zeros([SLICES], tl.float32)  # sum_c w_c x'_c, for label smoothing
            for start in range(0, n_cols, BLOCK):
                idx = start + tile
                mask = idx < n_cols
                # MODE 1 reads the row again in its second sweep: keep it in L2 meanwhile. Whole blocks
                # load unmasked (a masked load first fills its registers with the default value).
                if start + BLOCK <= n_cols:
                    x = tl.load(row_ptr + idx, eviction_policy="evict_last" if MODE == 1 else "")
                else:
                    x = tl.load(row_ptr + idx, mask=mask, other=-float("inf"),
                                eviction_policy="evict_last" if MODE == 1 else "")
                x = x.to(tl.float32)
                if HAS_SOFTCAP:
                    x = tl.where(mask, _capped(x, cap), -float("inf"))
                if SMOOTH:
                    if HAS_WEIGHT:
                        x_w = x * tl.load(weight_ptr + idx, mask=mask, other=0.0).to(tl.float32)
                        sx += tl.sum(tl.where(mask, x_w, 0.0), axis=1)
                    else:
                        sx += tl.sum(tl.where(mask, x, 0.0), axis=1)
                m_new = tl.maximum(m, tl.max(x, axis=1))
                m_ref = tl.where(m_new == -float("inf"), 0.0, m_new) * LOG2E  # slices with nothing yet
                s = s * tl.exp2(m * LOG2E - m_ref) + tl.sum(tl.exp2(x * LOG2E - m_ref[:, None]), axis=1)
                m = m_new
            m_row = tl.max(m, axis=0)
            m_row = tl.where(m_row == -float("inf"), 0.0, m_row)
            lse = m_row + tl.log(tl.sum(s * tl.exp2((m - m_row) * LOG2E), axis=0))
            xt = tl.load(row_ptr + t).to(tl.float32)
            if HAS_SOFTCAP:
                xt = _capped(xt, cap)
            loss = wt * (1.0 - eps) * (lse - xt)
            if SMOOTH:
                loss += eps / n_cols * (wsum * lse - tl.sum(sx, axis=0))
            if HAS_Z:
                loss += z * lse * lse
            tl.store(loss_ptr + row, tl.where(kept, loss, 0.0))
            tl.store(lse_ptr + row, lse)
            scale = tl.full([], 1.0, tl.float32)
            if REDUCTION == 2:
                scale = 1.0 / tl.load(denom_ptr)
        if MODE != 0:
            # dx'_c = a p_c - b [c = t] - c_s w_c, all times the row's scale (0 for rows left out)
            scale = tl.where(kept, scale, 0.0)
            b = scale * wt * (1.0 - eps)
            a = b + scale * eps * wsum / n_cols
            if HAS_Z:
                a += scale * 2.0 * z * lse
            c_s = scale * eps / n_cols
            lse2 = lse * LOG2E
            t32 = t.to(tl.int32)  # columns are int32: a 32-bit compare per element
            grad_row = grad_ptr + row * grad_stride
            n_blocks = tl.cdiv(n_cols, BLOCK)
            for j in range(0, n_blocks):
                start = ((n_blocks - 1 - j) if MODE == 1 else j) * BLOCK
                idx = start + cols
                mask = idx < n_cols
                whole = start + BLOCK <= n_cols
                # MODE 1: the last read of these logits (from L2 when the first sweep's lines stayed)
                if whole:
                    x = tl.load(row_ptr + idx, eviction_policy="evict_first" if MODE == 1 else "")
                else:
                    x = tl.load(row_ptr + idx, mask=mask, other=0.0, eviction_policy="evict_first" if MODE == 1 else "")
                x = x.to(tl.float32)
                if HAS_SOFTCAP:
                    x = _capped(x, cap)
                g = tl.exp2(x * LOG2E - lse2) * a - tl.where(idx == t32, b, 0.0)
                if SMOOTH:
                    if HAS_WEIGHT:
                        g -= c_s * tl.load(weight_ptr + idx, mask=mask, other=0.0).to(tl.float32)
                    else:
                        g -= c_s
                if HAS_SOFTCAP:
                    g = g * (1.0 - (x / cap) * (x / cap))
                g = g.to(grad_row.dtype.element_ty)
                if whole:
                    tl.store(grad_row + idx, g, eviction_policy="evict_first")
                else:
                    tl.store(grad_row + idx, g, mask=mask, eviction_policy="evict_first")


@triton.jit
def _ce_reduce_kernel(loss_ptr, target_ptr, weight_ptr, denom_ptr, out_ptr, n_rows, n_cols, ignore_index,
                      COUNT: tl.constexpr, HAS_WEIGHT: tl.constexpr, REDUCE: tl.constexpr, BLOCK: tl.constexpr):
    """Sum (REDUCE 1) or mean (2) of the row losses in a fixed order, or nothing (0); with COUNT, also the
    mean's denominator (sum of w_t over kept rows, else read from denom_ptr). 0/0 = NaN when every row
    was left out."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    den = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_rows, BLOCK):
        mask = start + offs < n_rows
        if REDUCE != 0:
            acc += tl.load(loss_ptr + start + offs, mask=mask, other=0.0)
        if COUNT:
            t = tl.load(target_ptr + start + offs, mask=mask, other=ignore_index).to(tl.int64)
            kept = mask & (t != ignore_index) & (t >= 0) & (t < n_cols)
            if HAS_WEIGHT:
                den += tl.load(weight_ptr + tl.where(kept, t, 0), mask=kept, other=0.0).to(tl.float32)
            else:
                den += tl.where(kept, 1.0, 0.0)
    if COUNT:
        denom = tl.sum(den, axis=0)
        tl.store(denom_ptr, denom)
    else:
        denom = tl.load(denom_ptr)
    if REDUCE != 0:
        total = tl.sum(acc, axis=0)
        if REDUCE == 2:
            total = total / denom
        tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


@triton.jit
def _scale_kernel(grad_ptr, dloss_ptr, n_rows, n_cols, stride, PER_ROW: tl.constexpr, BLOCK: tl.constexpr):
    """grad *= dloss (one value, or one per row), in place; nothing to do (and nothing read) where dloss
    is 1. Rows strided over the programs: the common dloss = 1 costs a few thousand programs at most."""
    cols = tl.arange(0, BLOCK)
    pid, n_programs = tl.program_id(0).to(tl.int64), tl.num_programs(0)
    for i in range(0, tl.cdiv(n_rows - pid, n_programs)):
        row = pid + i * n_programs
        g = tl.load(dloss_ptr + row).to(tl.float32) if PER_ROW else tl.load(dloss_ptr).to(tl.float32)
        if g != 1.0:
            for start in range(0, n_cols, BLOCK):
                mask = start + cols < n_cols
                ptr = grad_ptr + row * stride + start + cols
                tl.store(ptr, (tl.load(ptr, mask=mask, other=0.0).to(tl.float32) * g).to(grad_ptr.dtype.element_ty),
                         mask=mask)


# ------------------------------------------------------------------------------------ launchers


@functools.lru_cache(maxsize=8)
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _launch_shape(config: tuple[int, int, int], x: torch.Tensor) -> tuple[int, int, int]:
    """(BLOCK, num_warps, programs) for a row kernel over x [N, V]. The configs' BLOCK is for 16-bit
    logits; fp32 takes half as many per step (the same bytes, registers and 128-bit loads per thread)."""
    (n_rows, n_cols), device = x.shape, x.device
    block, warps, per_sm = config
    block = block * 2 // x.element_size()
    block = max(min(triton.next_power_of_2(max(n_cols, 1)), block), 16)  # at least one 128-bit vector
    programs = n_rows
    if per_sm and device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        programs = min(n_rows, per_sm * _sm_count(index))
    return block, min(warps, max(block // 256, 1)), max(programs, 1)


def _flags(weight: torch.Tensor | None, label_smoothing: float, z_loss: float, softcap: float | None) -> dict:
    return {"HAS_WEIGHT": weight is not None, "SMOOTH": label_smoothing > 0.0, "HAS_Z": z_loss > 0.0,
            "HAS_SOFTCAP": softcap is not None}


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


def _rows(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, V] with unit column stride (a view where possible) and [N] contiguous targets."""
    x = logits.reshape(-1, logits.shape[-1])
    return (x if x.stride(-1) == 1 else x.contiguous()), target.reshape(-1).contiguous()


def _setup(x: torch.Tensor, t: torch.Tensor, weight: torch.Tensor | None, ignore_index: int,
           label_smoothing: float) -> tuple[torch.Tensor, torch.Tensor]:
    denom = torch.empty((), dtype=torch.float32, device=x.device)
    wsum = torch.empty((), dtype=torch.float32, device=x.device)
    need_wsum = weight is not None and label_smoothing > 0.0
    _ce_setup_kernel[(1,)](t, weight if weight is not None else x, denom, wsum, t.shape[0], x.shape[1], ignore_index,
                           HAS_WEIGHT=weight is not None, NEED_WSUM=need_wsum, BLOCK=SETUP_BLOCK, num_warps=4)
    return denom, wsum


def _forward(x: torch.Tensor, t: torch.Tensor, weight: torch.Tensor | None, ignore_index: int, reduction: str,
             label_smoothing: float, z_loss: float, softcap: float | None, grad: torch.Tensor | None):
    """(loss, lse, denom, wsum) of [N, V] logits; with `grad` given, also dlogits for dloss = 1 into it.

    The denominator (and W) come from the setup kernel before the rows only where the row kernel needs
    them (a gradient for 'mean', or class weights with smoothing); otherwise the reduction kernel
    counts the kept rows after them: one small launch either way, none of it in the rows' way."""
    n_rows, n_cols = x.shape
    before = (weight is not None and label_smoothing > 0.0) or (grad is not None and reduction == "mean")
    if before:
        denom, wsum = _setup(x, t, weight, ignore_index, label_smoothing)
    else:
        denom = torch.empty((), dtype=torch.float32, device=x.device)
        wsum = denom  # not read: W only matters with class weights and smoothing
    row_loss = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    lse = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    block, warps, programs = _launch_shape(CONFIGS["fused" if grad is not None else "fwd"], x)
    if n_rows:
        _ce_kernel[(programs,)](
            x, t, weight if weight is not None else x, denom, wsum, row_loss, lse, lse, grad if grad is not None else x,
            n_rows, n_cols, x.stride(0), grad.stride(0) if grad is not None else 0, ignore_index,
            label_smoothing, z_loss, softcap or 1.0, **_flags(weight, label_smoothing, z_loss, softcap),
            MODE=0 if grad is None else 1, REDUCTION=REDUCTIONS[reduction], BLOCK=block, num_warps=warps)
    loss = row_loss if reduction == "none" else torch.empty((), dtype=x.dtype, device=x.device)
    if not (before and reduction == "none"):
        reduce_block = min(triton.next_power_of_2(max(n_rows, 1)), SETUP_BLOCK)
        _ce_reduce_kernel[(1,)](row_loss, t, weight if weight is not None else x, denom, loss, n_rows, n_cols,
                                ignore_index, COUNT=not before, HAS_WEIGHT=weight is not None,
                                REDUCE=REDUCTIONS[reduction], BLOCK=reduce_block, num_warps=4)
    if reduction == "none":
        return row_loss.to(x.dtype), lse, denom, wsum
    return loss, lse, denom, wsum


def _backward(x: torch.Tensor, t: torch.Tensor, weight: torch.Tensor | None, lse: torch.Tensor,
              denom: torch.Tensor, wsum: torch.Tensor, dloss: torch.Tensor, ignore_index: int, reduction: str,
              label_smoothing: float, z_loss: float, softcap: float | None) -> torch.Tensor:
    n_rows, n_cols = x.shape
    grad = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    block, warps, programs = _launch_shape(CONFIGS["bwd"], x)
    if n_rows:
        _ce_kernel[(programs,)](
            x, t, weight if weight is not None else x, denom, wsum, lse, lse, dloss.contiguous(), grad,
            n_rows, n_cols, x.stride(0), grad.stride(0), ignore_index, label_smoothing, z_loss, softcap or 1.0,
            **_flags(weight, label_smoothing, z_loss, softcap), MODE=2, REDUCTION=REDUCTIONS[reduction],
            BLOCK=block, num_warps=warps)
    return grad


def _scale(grad: torch.Tensor, dloss: torch.Tensor) -> None:
    """grad [N, V] *= dloss (0-dim, or [N] for reduction none), in place."""
    n_rows, n_cols = grad.shape
    if n_rows and n_cols:
        block = min(triton.next_power_of_2(n_cols), SCALE_BLOCK)
        programs = n_rows
        if grad.device.type == "cuda":
            index = grad.device.index if grad.device.index is not None else torch.cuda.current_device()
            programs = min(n_rows, SCALE_PROGRAMS_PER_SM * _sm_count(index))
        _scale_kernel[(programs,)](grad, dloss.contiguous(), n_rows, n_cols, grad.stride(0), PER_ROW=dloss.dim() > 0,
                                   BLOCK=block, num_warps=max(1, min(8, block // 1024)))


# ------------------------------------------------------------------------------- kernel paths


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """[N, V] view of t's storage (never a copy: in-place kernels must write where t lives)."""
    try:
        return t.view(-1, t.shape[-1])
    except RuntimeError as e:
        raise ValueError(f"in-place cross-entropy needs logits viewable as rows; got strides {t.stride()}") from e


def _fwd_kernels(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, ignore_index: int,
                 reduction: str, label_smoothing: float, z_loss: float,
                 softcap: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, lse, denom) by the kernels, no gradient."""
    _check(logits, target, weight, reduction, softcap)
    x, t = _rows(logits, target)
    loss, lse, denom, _ = _forward(x, t, weight, ignore_index, reduction, label_smoothing, z_loss, softcap, None)
    return loss.view(target.shape) if reduction == "none" else loss, lse, denom


def _fused_kernels(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, ignore_index: int,
                   reduction: str, label_smoothing: float, z_loss: float, softcap: float | None,
                   inplace: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, dlogits for dloss = 1) in one read of the logits; the gradient overwrites the logits when
    `inplace` (then it is the logits' own storage, viewed in their shape)."""
    _check(logits, target, weight, reduction, softcap)
    if inplace:
        x, t = _as_rows(logits), target.reshape(-1).contiguous()
        if x.stride(-1) != 1:
            raise ValueError("in-place cross-entropy needs logits with unit stride along V")
        grad = x
    else:
        x, t = _rows(logits, target)
        grad = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    loss, *_ = _forward(x, t, weight, ignore_index, reduction, label_smoothing, z_loss, softcap, grad)
    return loss.view(target.shape) if reduction == "none" else loss, grad.view(logits.shape)


def _bwd_kernels(logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, denom: torch.Tensor,
                 dloss: torch.Tensor, weight: torch.Tensor | None, ignore_index: int, reduction: str,
                 label_smoothing: float, z_loss: float, softcap: float | None) -> torch.Tensor:
    """dlogits from the saved logsumexp: the logits are read once more."""
    x, t = _rows(logits, target)
    _, wsum = _setup(x, t, weight, ignore_index, label_smoothing)
    return _backward(x, t, weight, lse, denom, wsum, dloss.reshape(-1) if reduction == "none" else dloss,
                     ignore_index, reduction, label_smoothing, z_loss, softcap).view(logits.shape)


# ---------------------------------------------------------------------------- CPU, plain torch
# Where the kernels cannot run (CPU tensors outside the Triton interpreter) the custom ops compute in
# torch, fp32 (fp64 for fp64). None of this is on ModelNew's path: the verifier checks that path runs
# only kernels.

INTERPRETING = not isinstance(_ce_kernel, triton.runtime.JITFunction)  # TRITON_INTERPRET=1: CPU kernels


def _on_triton(t: torch.Tensor) -> bool:
    return t.is_cuda or INTERPRETING


def _torch_rows(logits, target, weight, ignore_index, label_smoothing, z_loss, softcap) -> dict:
    """Per-row loss (0 where left out), logsumexp and what the gradient needs, by the formulas above."""
    v = logits.shape[-1]
    x = logits.reshape(-1, v)
    x = x.double() if x.dtype == torch.float64 else x.float()
    if softcap is not None:
        x = softcap * torch.tanh(x / softcap)
    t = target.reshape(-1)
    kept = (t != ignore_index) & (t >= 0) & (t < v)
    ts = torch.where(kept, t, torch.zeros_like(t))
    w = weight.to(x.dtype) if weight is not None else None
    wt = w[ts] if w is not None else torch.ones_like(x[:, 0])
    wsum = w.sum() if w is not None else torch.tensor(float(v), dtype=x.dtype)
    lse = torch.logsumexp(x, dim=-1)
    loss = wt * (1.0 - label_smoothing) * (lse - x.gather(1, ts[:, None])[:, 0])
    if label_smoothing > 0.0:
        loss = loss + label_smoothing / v * (wsum * lse - (x * w if w is not None else x).sum(-1))
    if z_loss > 0.0:
        loss = loss + z_loss * lse * lse
    return {"x": x, "ts": ts, "kept": kept, "w": w, "wt": wt, "wsum": wsum, "lse": lse,
            "loss": torch.where(kept, loss, torch.zeros_like(loss)),
            "denom": torch.where(kept, wt, torch.zeros_like(wt)).sum()}


def _torch_loss(r: dict, reduction: str, dtype: torch.dtype, shape: torch.Size) -> torch.Tensor:
    if reduction == "none":
        return r["loss"].to(dtype).view(shape)
    total = r["loss"].sum()
    return (total / r["denom"] if reduction == "mean" else total).to(dtype)


def _torch_grad(r: dict, scale: torch.Tensor, label_smoothing: float, z_loss: float, softcap: float | None,
                dtype: torch.dtype, shape: torch.Size) -> torch.Tensor:
    """dloss/dlogits with a per-row scale (0 for rows left out)."""
    x, v, eps = r["x"], r["x"].shape[-1], label_smoothing
    scale = torch.where(r["kept"], scale.to(x.dtype), torch.zeros_like(r["lse"]))
    b = scale * r["wt"] * (1.0 - eps)
    a = b + scale * eps * r["wsum"] / v + (scale * 2.0 * z_loss * r["lse"] if z_loss > 0.0 else 0.0)
    g = torch.exp(x - r["lse"][:, None]) * a[:, None]
    if eps > 0.0:
        g = g - (scale * eps / v)[:, None] * (r["w"][None, :] if r["w"] is not None else 1.0)
    g = g.scatter_add(1, r["ts"][:, None], -b[:, None])
    if softcap is not None:
        g = g * (1.0 - (x / softcap) ** 2)
    return g.to(dtype).view(shape)


def _row_scale(r: dict, dloss: torch.Tensor, reduction: str) -> torch.Tensor:
    d = dloss.reshape(-1).to(r["lse"].dtype)
    if reduction == "mean":
        d = d / r["denom"]
    return d.expand_as(r["lse"])


# ----------------------------------------------------------------------------------- custom ops


def _register(name: str, impl, fake, mutates_args=(), autograd=None):
    """`impl` as the torch custom op `kernelagent::<name>`, with `fake` for shape propagation and
    `autograd` = (backward, setup_context) where the op is differentiable.

    Registered once per process: a second copy of this file (imported by path) reuses the first.
    """
    if hasattr(torch.ops.kernelagent, name):
        return getattr(torch.ops.kernelagent, name)
    op = torch.library.custom_op(f"kernelagent::{name}", impl, mutates_args=mutates_args)
    op.register_fake(fake)
    if autograd is not None:
        op.register_autograd(autograd[0], setup_context=autograd[1])
    return op


def _fwd_impl(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
              ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0, z_loss: float = 0.0,
              softcap: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if _on_triton(logits):
        return _fwd_kernels(logits, target, weight, ignore_index, reduction, label_smoothing, z_loss, softcap)
    _check(logits, target, weight, reduction, softcap)
    r = _torch_rows(logits, target, weight, ignore_index, label_smoothing, z_loss, softcap)
    return (_torch_loss(r, reduction, logits.dtype, target.shape), r["lse"].float(),
            r["denom"].float().reshape(()))


def _fwd_fake(logits, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, z_loss=0.0,
              softcap=None):
    loss = logits.new_empty(target.shape if reduction == "none" else ())
    return loss, logits.new_empty((target.numel(),), dtype=torch.float32), logits.new_empty((), dtype=torch.float32)


def _bwd_impl(logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, denom: torch.Tensor,
              dloss: torch.Tensor, weight: torch.Tensor | None = None, ignore_index: int = -100,
              reduction: str = "mean", label_smoothing: float = 0.0, z_loss: float = 0.0,
              softcap: float | None = None) -> torch.Tensor:
    if _on_triton(logits):
        return _bwd_kernels(logits, target, lse, denom, dloss, weight, ignore_index, reduction, label_smoothing,
                            z_loss, softcap)
    r = _torch_rows(logits, target, weight, ignore_index, label_smoothing, z_loss, softcap)
    return _torch_grad(r, _row_scale(r, dloss, reduction), label_smoothing, z_loss, softcap, logits.dtype,
                       logits.shape)


def _bwd_fake(logits, target, lse, denom, dloss, weight=None, ignore_index=-100, reduction="mean",
              label_smoothing=0.0, z_loss=0.0, softcap=None):
    return torch.empty_like(logits, memory_format=torch.contiguous_format)


def _fused_impl(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
                ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0, z_loss: float = 0.0,
                softcap: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    if _on_triton(logits):
        return _fused_kernels(logits, target, weight, ignore_index, reduction, label_smoothing, z_loss, softcap,
                              False)
    _check(logits, target, weight, reduction, softcap)
    r = _torch_rows(logits, target, weight, ignore_index, label_smoothing, z_loss, softcap)
    one = torch.ones((), dtype=r["lse"].dtype)
    return (_torch_loss(r, reduction, logits.dtype, target.shape),
            _torch_grad(r, _row_scale(r, one, "mean" if reduction == "mean" else "sum"), label_smoothing, z_loss,
                        softcap, logits.dtype, logits.shape))


def _fused_fake(logits, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, z_loss=0.0,
                softcap=None):
    loss = logits.new_empty(target.shape if reduction == "none" else ())
    return loss, torch.empty_like(logits, memory_format=torch.contiguous_format)


def _scale_impl(grad: torch.Tensor, dloss: torch.Tensor) -> None:
    if _on_triton(grad):
        _scale(_as_rows(grad), dloss.reshape(-1) if dloss.dim() else dloss)
    else:
        grad.mul_(dloss.reshape(-1, 1).to(grad.dtype) if dloss.dim() else dloss.to(grad.dtype))


def _scale_fake(grad, dloss) -> None:
    return None


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
    grad = cross_entropy_bwd(logits, target, lse, denom, dloss, weight, **ctx.options)
    return grad, None, None, None, None, None, None, None


def _fused_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(output[1])
    ctx.set_materialize_grads(False)


def _fused_backward(ctx, dloss, _dgrad):
    (grad,) = ctx.saved_tensors
    if dloss is None:
        return None, None, None, None, None, None, None, None
    cross_entropy_scale_(grad, dloss)
    return grad, None, None, None, None, None, None, None


# (loss, lse, denom): loss (logits' dtype; 0-dim, or the target's shape for 'none'), per-row logsumexp
# (fp32), and the mean's denominator (fp32 0-dim: kept rows, or their class-weight sum); differentiable
cross_entropy_fwd = _register("cross_entropy_fwd", _fwd_impl, _fwd_fake, autograd=(_fwd_backward, _fwd_setup))
# dlogits from the saved logsumexp and dloss
cross_entropy_bwd = _register("cross_entropy_bwd", _bwd_impl, _bwd_fake)
# (loss, dlogits for dloss = 1) in one read of the logits; differentiable (the backward scales)
cross_entropy_fused = _register("cross_entropy_fused", _fused_impl, _fused_fake,
                                autograd=(_fused_backward, _fused_setup))
# grad *= dloss in place (skipped on the GPU where dloss is 1)
cross_entropy_scale_ = _register("cross_entropy_scale_", _scale_impl, _scale_fake, mutates_args=("grad",))


def _compiling() -> bool:
    return torch.compiler.is_compiling()


# ------------------------------------------------------------------------------------- autograd
# Options are passed by name or one by one, never as *args: the verifier's static policy cannot tell
# what a starred tuple holds and would treat every option as a tensor.


class _CrossEntropyFunction(torch.autograd.Function):
    """Autograd straight over the kernels (no dispatcher: ~35 us less per call, and what the verifier
    must see). Mean/sum, or inplace_backward: the forward writes the gradient and the backward scales
    it; 'none' otherwise: the backward re-reads the logits."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, ignore_index: int,
                reduction: str, label_smoothing: float, z_loss: float, softcap: float | None, inplace: bool):
        ctx.fused = inplace or reduction != "none"
        if ctx.fused:
            loss, grad = _fused_kernels(logits, target, weight, ignore_index, reduction, label_smoothing, z_loss,
                                        softcap, inplace)
            ctx.save_for_backward(grad.detach())
        else:
            loss, lse, denom = _fwd_kernels(logits, target, weight, ignore_index, reduction, label_smoothing, z_loss,
                                            softcap)
            ctx.save_for_backward(logits, target, weight, lse, denom)
            ctx.options = {"ignore_index": ignore_index, "reduction": reduction, "label_smoothing": label_smoothing,
                           "z_loss": z_loss, "softcap": softcap}
        return loss

    @staticmethod
    def backward(ctx, dloss):
        if ctx.fused:
            (grad,) = ctx.saved_tensors
            _scale(_as_rows(grad), dloss.reshape(-1) if dloss.dim() else dloss)
        else:
            logits, target, weight, lse, denom = ctx.saved_tensors
            grad = _bwd_kernels(logits, target, lse, denom, dloss, weight, **ctx.options)
        return grad, None, None, None, None, None, None, None, None


# ----------------------------------------------------------------------------------- public API


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, *, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0, z_loss: float = 0.0,
                  softcap: float | None = None, weight: torch.Tensor | None = None,
                  inplace_backward: bool = False) -> torch.Tensor:
    """Cross-entropy of logits [..., V] (fp32/fp16/bf16; classes last) against integer targets [...],
    with F.cross_entropy's weight/ignore_index/reduction/label_smoothing, plus z_loss (z * lse^2 per kept
    row) and softcap (logits -> softcap * tanh(logits / softcap) first). Differentiable in logits; the
    loss is in the logits' dtype. inplace_backward=True writes the gradient into the logits' storage
    during the forward (the caller must not use the logits afterwards; eager only: under torch.compile
    the functional op runs). CUDA: the kernels; CPU: torch (the kernels under TRITON_INTERPRET=1)."""
    ls, z = float(label_smoothing), float(z_loss)
    cap = None if softcap is None else float(softcap)
    grad = torch.is_grad_enabled() and logits.requires_grad
    if _compiling() or not _on_triton(logits):
        if grad and reduction != "none":
            return cross_entropy_fused(logits, target, weight, ignore_index, reduction, ls, z, cap)[0]
        return cross_entropy_fwd(logits, target, weight, ignore_index, reduction, ls, z, cap)[0]
    if grad:
        return _CrossEntropyFunction.apply(logits, target, weight, ignore_index, reduction, ls, z, cap,
                                           inplace_backward)
    return _fwd_kernels(logits, target, weight, ignore_index, reduction, ls, z, cap)[0]


class CrossEntropyLoss(nn.Module):
    """Drop-in for nn.CrossEntropyLoss over logits [..., V] (classes last), with z_loss, softcap and
    inplace_backward; the class weights are a buffer."""

    def __init__(self, weight: torch.Tensor | None = None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0, z_loss: float = 0.0, softcap: float | None = None,
                 inplace_backward: bool = False):
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing
        self.z_loss, self.softcap, self.inplace_backward = z_loss, softcap, inplace_backward

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return cross_entropy(logits, target, ignore_index=self.ignore_index, reduction=self.reduction,
                             label_smoothing=self.label_smoothing, z_loss=self.z_loss, softcap=self.softcap,
                             weight=self.weight, inplace_backward=self.inplace_backward)


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
        return _fwd_kernels(logits, target, w, ignore_index, reduction, label_smoothing, z_loss, softcap)[0]
