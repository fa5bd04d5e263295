"""Probe (H200): the CuTe DSL attention backward (its dK/dV and dQ kernels, one statistics table) against
the Triton backward, at B=2 H=16 S=8192 D=128 bf16 (and D=64), causal and not, from one CuTe forward:
gradients compared with the Triton backward's (relative L2) and timed with triton.testing.do_bench
(median, warmup 25 ms, rep 100 ms); each CuTe kernel alone, with 2 and 3 stages. Writes
attention_bwd_cute.json (benchmarks.common.write_result: $OUT or benchmarks/results).

  source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/attention_bwd_cute.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.common import median_ms as _ms  # noqa: E402
from benchmarks.common import write_result  # noqa: E402
from kernelagent.kernels.attention import cute as ac  # noqa: E402

B, S, H = 2, 8192, 16
FWD_FLOPS = 4 * B * H * S * S  # times D; halved when causal
METHOD = ("triton.testing.do_bench median (warmup 25 ms, rep 100 ms, L2 flushed), one call after a first "
          "(compiling, autotuning) one; backward TFLOP/s count 2.5x the forward's FLOPs (FlashAttention's count)")


def _rel(a, b) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


def _case(d: int, causal: bool) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(B, S, H, d, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    window = (None, 0) if causal else (None, None)
    scale = d ** -0.5
    out, _, stats = ac.attention_forward(q, k, v, scale, None, window)
    row = {"d": d, "causal": causal}
    tri = ac._bwd_launch(do, q, k, v, out, stats, None, None, None, S, S, scale, None, window)
    cut = ac.attention_backward(do, q, k, v, out, stats, None, scale, None, window)
    row["rel_cute_vs_triton"] = {n: _rel(c, t) for n, c, t in zip(("dq", "dk", "dv"), cut, tri, strict=True)}
    tab = ac._stats_table(do, out, stats, None)
    dq = torch.empty_like(q)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    times = {
        "triton_bwd": _ms(lambda: ac._bwd_launch(do, q, k, v, out, stats, None, None, None, S, S, scale, None,
                                                 window)),
        "cute_bwd": _ms(lambda: ac.attention_backward(do, q, k, v, out, stats, None, scale, None, window)),
        "cute_dkdv": _ms(lambda: ac.dkdv_backward(q, k, v, do, tab, dk, dv, scale, None, window)),
        "cute_dq": _ms(lambda: ac.dq_backward(q, k, v, do, tab, dq, False, scale, None, window)),
        "stats_table": _ms(lambda: ac._stats_table(do, out, stats, None)),
    }
    times.update(_stage_sweep(q, k, v, do, tab, dq, dk, dv, scale, window))
    flops = FWD_FLOPS * d / (2 if causal else 1)
    row["ms"] = times
    row["bwd_tflops"] = {n: 2.5 * flops / (times[n] * 1e-3) / 1e12 for n in ("triton_bwd", "cute_bwd")}
    row["dkdv_gemm_tflops"] = 2 * flops / (times["cute_dkdv"] * 1e-3) / 1e12  # its 4 GEMMs
    row["dq_gemm_tflops"] = 1.5 * flops / (times["cute_dq"] * 1e-3) / 1e12  # its 3 GEMMs
    return row


def _stage_sweep(q, k, v, do, tab, dq, dk, dv, scale, window) -> dict:
    """Both CuTe kernels with 2 and 3 pipeline stages (the defaults are one of them)."""
    times = {}
    tiles = {"dkdv": ac._bwd_tiles, "dq": ac._dq_tiles}
    for stages in (2, 3):
        ac._bwd_tiles = lambda d, s=stages: {**tiles["dkdv"](d), "stages": s}
        ac._dq_tiles = lambda d, s=stages: {**tiles["dq"](d), "stages": s}
        try:
            times[f"cute_dkdv_stages{stages}"] = _ms(lambda: ac.dkdv_backward(q, k, v, do, tab, dk, dv, scale, None,
                                                                              window))
            times[f"cute_dq_stages{stages}"] = _ms(lambda: ac.dq_backward(q, k, v, do, tab, dq, False, scale, None,
                                                                          window))
        finally:
            ac._bwd_tiles, ac._dq_tiles = tiles["dkdv"], tiles["dq"]
    return times


def main() -> int:
    rows = []
    for d in (128, 64):
        for causal in (False, True):
            try:
                rows.append(_case(d, causal))
            except Exception as e:  # noqa: BLE001 - a failing case is a row
                rows.append({"d": d, "causal": causal, "error": f"{type(e).__name__}: {str(e)[:2000]}"})
            print(json.dumps(rows[-1]), flush=True)
    write_result("attention_bwd_cute", {"method": METHOD, "shape_bsh": [B, S, H], "rows": rows})
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
