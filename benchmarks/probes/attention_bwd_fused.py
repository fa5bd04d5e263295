"""Probe (H200): the fused CuTe DSL attention backward (one kernel, five GEMMs a step, dQ's parts added in
fp32 across key blocks by bulk reductions, a dQ post-pass) against the split one (dK/dV, then dQ: seven
GEMMs), at B=2 H=16 S=8192 bf16, D=128 and 64, causal and not, from one CuTe forward: gradients compared
(relative L2), each backward and the forward + backward through `attention` timed with
triton.testing.do_bench (median, warmup 25 ms, rep 100 ms); the fused kernel's other settings (GROUPS,
KA_PROBE_VARIANTS picks one: "ablations", the kernel without parts of its work (dQ's parts added from
registers too in commit da2c159); "shared", the shared-dQ schedule; "pred_reds", the atomics predicated in both
schedules (in the run of 2026-12-04-h200/attention_bwd_fused_pred_reds.json `pred_reds` was the default, so its
fused_bwd is "pred_reds" here and "shared_dq" had it on), each timed with its dQ against the split's
(options tried and removed as slower: `dq_together` of commit f3a923d, dQ's passes all issued before the first
is stored; `dq_red="global"` and `late_wait` of commit da2c159; `late_best`, `lean_reds` and `lag`, with their
groups, of commits f632d51, 1e2bee7 and 8c69ce8). Also dQ's error against float64 where the keys
sit far from 0 (k + 60: the case the centring is for), both backwards. Writes attention_bwd_fused.json
(benchmarks.common.write_result: $OUT or benchmarks/results). KA_PROBE_D=128 limits the head dims;
KA_PROBE_ROUNDS=N times the settings in N alternating rounds, the shipped kernel among them (median and each round).

  source .carry/setup.sh && PYTHONPATH=$PWD KA_PROBE_VARIANTS=ablations python3 benchmarks/probes/attention_bwd_fused.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.common import median_ms as _ms  # noqa: E402
from benchmarks.common import write_result  # noqa: E402
from kernelagent.kernels.attention import cute as ac  # noqa: E402
from kernelagent.kernels.attention.reference import attention_reference  # noqa: E402

B, S, H = 2, 8192, 16
FWD_FLOPS = 4 * B * H * S * S  # times D; halved when causal
# the fused kernel's other settings (FlashBwdFusedSm90's options), in groups (KA_PROBE_VARIANTS names one; at D=64
# only its first `d64` run). Schedules and pred_reds are stated in full, so a group times the same kernels whatever
# the default; "ablations" change the default only. "ablate" options time the kernel without a part of its work (dQ
# then wrong): where its time goes. (In the run of 2026-12-03 the fused default was the shared schedule; from then
# until 2026-12-04's pred_rounds file the private one without pred_reds; since, shared with pred_reds at d128.)
PRIVATE, SHARED = {"private_dq": True, "pred_reds": False}, {"private_dq": False, "pred_reds": False}
GROUPS = {
    "ablations": (0, [
        ("ablate_best", {"ablate": ("best",)}), ("ablate_rowsum", {"ablate": ("rowsum",)}),
        ("ablate_best_rowsum", {"ablate": ("best", "rowsum")}), ("ablate_reduce", {"ablate": ("reduce",)}),
        ("ablate_dq", {"ablate": ("dq",)})]),
    "shared": (1, [
        ("shared_dq", SHARED), ("shared_dq_ablate_best", {**SHARED, "ablate": ("best",)}),
        ("shared_dq_ablate_best_rowsum", {**SHARED, "ablate": ("best", "rowsum")})]),
    "pred_reds": (4, [
        ("pred_reds", {**PRIVATE, "pred_reds": True}), ("no_pred_reds", PRIVATE),
        ("shared_dq", {**SHARED, "pred_reds": True}), ("shared_dq_no_pred_reds", SHARED),
        ("shared_dq_ablate_best_rowsum", {**SHARED, "pred_reds": True, "ablate": ("best", "rowsum")})]),
}
D64_COUNT, VARIANTS = GROUPS[os.environ.get("KA_PROBE_VARIANTS", "shared")]
HEAD_DIMS = [int(d) for d in os.environ.get("KA_PROBE_D", "128,64").split(",")]
ROUNDS = int(os.environ.get("KA_PROBE_ROUNDS", "1"))
METHOD = ("triton.testing.do_bench median (warmup 25 ms, rep 100 ms, L2 flushed), after a first (compiling) "
          "call; backward TFLOP/s count 2.5x the forward's FLOPs, forward+backward 3.5x (FlashAttention's count)")


def _rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def _backward(fused: bool, *args):
    return _with(fused, ac.attention_backward, *args)


def _with(fused: bool, call, *args):
    before, ac.FUSED_BACKWARD = ac.FUSED_BACKWARD, fused
    try:
        return call(*args)
    finally:
        ac.FUSED_BACKWARD = before


def _case(d: int, causal: bool) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(B, S, H, d, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    window = (None, 0) if causal else (None, None)
    scale = d ** -0.5
    out, _, stats = ac.attention_forward(q, k, v, scale, None, window)
    args = (do, q, k, v, out, stats, None, scale, None, window)
    split, fused = _backward(False, *args), _backward(True, *args)
    row = {"d": d, "causal": causal,
           "rel_fused_vs_split": {n: _rel(f, s) for n, f, s in zip(("dq", "dk", "dv"), fused, split, strict=True)}}
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]

    def fwd_bwd():
        for t in leaves:
            t.grad = None
        ac.attention(*leaves, causal=causal).backward(do)

    times = {"split_bwd": _ms(lambda: _backward(False, *args)), "fused_bwd": _ms(lambda: _backward(True, *args)),
             "fwd": _ms(lambda: ac.attention_forward(q, k, v, scale, None, window)),
             "split_fwd_bwd": _ms(lambda: _with(False, fwd_bwd)), "fused_fwd_bwd": _ms(lambda: _with(True, fwd_bwd))}
    row["variants"] = _variants(args, split, VARIANTS if d == 128 else VARIANTS[:D64_COUNT])
    flops = FWD_FLOPS * d / (2 if causal else 1)
    row["ms"] = times
    row["tflops"] = {"split_bwd": 2.5 * flops / times["split_bwd"] / 1e9,
                     "fused_bwd": 2.5 * flops / times["fused_bwd"] / 1e9,
                     "fwd": flops / times["fwd"] / 1e9, "split_fwd_bwd": 3.5 * flops / times["split_fwd_bwd"] / 1e9,
                     "fused_fwd_bwd": 3.5 * flops / times["fused_fwd_bwd"] / 1e9}
    return row


def _variants(args, split, variants) -> dict:
    """The fused kernel with other settings than its defaults: dQ against the split's and the time, the median of
    ROUNDS rounds that take the settings in turn (with several rounds "default", the kernel as it ships, is one of
    them, so every setting has a baseline timed beside it)."""
    named = ([("default", {})] if ROUNDS > 1 else []) + list(variants)
    base, out, times = ac._fused_tiles, {}, {name: [] for name, _ in named}
    for _ in range(ROUNDS):
        for name, change in named:
            if isinstance(out.get(name), str):  # it failed in an earlier round
                continue
            ac._fused_tiles = lambda d, c=change: {**base(d), **c}
            try:
                times[name].append(_ms(lambda: _backward(True, *args)))
                out.setdefault(name, {"rel_dq_vs_split": _rel(_backward(True, *args)[0], split[0])})
            except Exception as e:  # noqa: BLE001 - a variant that fails is a note
                out[name] = f"{type(e).__name__}: {str(e)[:300]}"
            finally:
                ac._fused_tiles = base
    for name, ms in times.items():
        if isinstance(out.get(name), dict):
            out[name].update(ms=statistics.median(ms), ms_rounds=ms)
    return out


def _offset_keys() -> dict:
    """dQ against float64 where every key is offset by 60 (bf16, causal, 1 x 1024 x 4 heads of 128)."""
    gen = torch.Generator(device="cuda").manual_seed(3)
    q, k, v, do = (torch.randn(1, 1024, 4, 128, generator=gen, device="cuda") for _ in range(4))
    k = k + 60
    q, k, v, do = (t.to(torch.bfloat16) for t in (q, k, v, do))
    scale = 128 ** -0.5
    out, _, stats = ac.attention_forward(q, k, v, scale, None, (None, 0))
    args = (do, q, k, v, out, stats, None, scale, None, (None, 0))
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    attention_reference(*leaves, causal=True).backward(do.double())
    low = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    attention_reference(*low, causal=True).backward(do)
    row = {"reference_bf16": {n: _rel(t.grad, x.grad) for n, t, x in zip("qkv", low, leaves, strict=True)}}
    for name, fused in (("split", False), ("fused", True)):
        got = _backward(fused, *args)
        row[name] = {n: _rel(g, x.grad) for n, g, x in zip("qkv", got, leaves, strict=True)}
    return row


def main() -> int:
    rows = []
    for d in HEAD_DIMS:
        for causal in (False, True):
            try:
                rows.append(_case(d, causal))
            except Exception as e:  # noqa: BLE001 - a failing case is a row
                rows.append({"d": d, "causal": causal, "error": f"{type(e).__name__}: {str(e)[:2000]}"})
            print(json.dumps(rows[-1]), flush=True)
            write_result("attention_bwd_fused", {"method": METHOD, "shape_bsh": [B, S, H], "rows": rows})
    offset = _offset_keys()
    print(json.dumps(offset), flush=True)
    write_result("attention_bwd_fused", {"method": METHOD, "shape_bsh": [B, S, H], "rows": rows,
                                         "keys_offset_60": offset})
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
