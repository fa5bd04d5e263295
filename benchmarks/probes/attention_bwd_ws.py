"""Probe (H200): the Triton backward's configs one by one, with trial tables where the file has them (BWD_WS_TABLE,
DQ_WS_TABLE: warp-specialised configs outside the autotuner's lists, in triton.py up to commit 4099f67, which made
benchmarks/results/2026-12-05-h200/attention_bwd_ws.json; dropped after it), at B=2 H=16 S=8192 bf16, D=128 and 64,
causal and not.

For each kernel (dK/dV, dQ) and each config of its table and trial table that covers the head dim, the whole
backward (`_bwd_launch`) is timed with that config forced and the other kernel held at its table's first config,
so the differences are the kernel's; its dQ, dK, dV are compared with those of the first configs (relative L2).
With BEFORE=path/to/an/older/triton.py the two files' autotuned backwards are also timed in turn (e.g. the dQ
kernel's centre search before and after). Times: triton.testing.do_bench median (warmup 25 ms, rep 100 ms, L2
flushed), KA_PROBE_ROUNDS rounds (default 2). Writes attention_bwd_ws.json (benchmarks.common.write_result:
$OUT or benchmarks/results).

  source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/attention_bwd_ws.py
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
import triton  # noqa: E402

from benchmarks.common import load_module, write_result  # noqa: E402
from benchmarks.common import median_ms as _ms  # noqa: E402
from kernelagent.kernels.attention import triton as current  # noqa: E402

B, S, H = 2, 8192, 16
METHOD = ("triton.testing.do_bench median (warmup 25 ms, rep 100 ms, L2 flushed) of the whole backward after a first "
          "(compiling) call, one config forced for the kernel under test, the other kernel at its table's first config")


def _inputs(d: int, causal: bool) -> tuple:
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(B, S, H, d, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    window = (None, 0) if causal else (None, None)
    out, _, stats = current._fwd_launch(q, k, v, None, None, S, S, d ** -0.5, None, window)
    return (do, q, k, v, out, stats, None, None, None, S, S, d ** -0.5, None, window)


def _force(mod, dkdv, dq) -> None:
    mod._DKDV = triton.autotune([dkdv], key=[])(mod._attn_dkdv_kernel)
    mod._DQ = triton.autotune([dq], key=[])(mod._attn_dq_kernel)


def _candidates(mod, d: int) -> dict[str, list]:
    """Per kernel: the table's configs, then the trial's (if the file has one), those covering head dim d."""
    def fits(table, trial):
        cfgs = mod._configs(table) + (mod._configs(getattr(mod, trial), ws=True) if hasattr(mod, trial) else [])
        return [c for c in cfgs if d <= c.kwargs["MAX_D"]]
    return {"dkdv": fits(mod.BWD_TABLE, "BWD_WS_TABLE"), "dq": fits(mod.DQ_TABLE, "DQ_WS_TABLE")}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def _config_rows(args, d: int, causal: bool, rounds: int) -> list[dict]:
    """Each candidate checked once against the first configs, then all timed in turn each round."""
    cands = _candidates(current, d)
    base = {"dkdv": cands["dkdv"][0], "dq": cands["dq"][0]}
    _force(current, base["dkdv"], base["dq"])
    ref = current._bwd_launch(*args)
    rows, timed = [], []
    for kernel, cfgs in cands.items():
        for cfg in cfgs:
            forced = dict(base, **{kernel: cfg})
            row = {"d": d, "causal": causal, "kernel": kernel, "config": str(cfg), "ws": bool(cfg.kwargs.get("WS")),
                   "ms": []}
            try:
                _force(current, forced["dkdv"], forced["dq"])
                got = current._bwd_launch(*args)
                row["rel_vs_first"] = {n: _rel(g, r) for n, g, r in zip(("dq", "dk", "dv"), got, ref, strict=True)}
                row["finite"] = all(bool(torch.isfinite(g).all()) for g in got)
                timed.append((row, forced))
            except Exception as exc:  # a config that does not compile or launch is a finding, not the end
                row["error"] = f"{type(exc).__name__}: {str(exc)[-400:]}"
            rows.append(row)
    for _ in range(rounds):
        for row, forced in timed:
            _force(current, forced["dkdv"], forced["dq"])
            row["ms"].append(_ms(lambda: current._bwd_launch(*args)))
    for row in rows:
        print(json.dumps(row), flush=True)
    return rows


def _before_row(versions: dict, args, d: int, causal: bool, rounds: int) -> dict:
    """The autotuned backwards of two files, timed in turn each round."""
    calls = {name: (lambda mod=mod: mod._bwd_launch(*args)) for name, mod in versions.items()}
    outs = {name: call() for name, call in calls.items()}
    row = {"d": d, "causal": causal, "ms": {name: [] for name in calls},
           "rel_now_vs_before": {n: _rel(a, b) for n, a, b in zip(("dq", "dk", "dv"), outs["now"], outs["before"],
                                                                   strict=True)}}
    for _ in range(rounds):
        for name, call in calls.items():
            row["ms"][name].append(_ms(call))
    row["ms_median"] = {name: statistics.median(ms) for name, ms in row["ms"].items()}
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    rounds = int(os.environ.get("KA_PROBE_ROUNDS", "2"))
    versions = None
    if os.environ.get("BEFORE"):  # "now" as its own copy: the config rows force the imported module's kernels
        versions = {"before": load_module(os.environ["BEFORE"], "attention_triton_before"),
                    "now": load_module(current.__file__, "attention_triton_now")}
    result = {"method": METHOD, "shape": [B, S, H], "configs": [], "before_vs_now": []}
    for d in (128, 64):
        for causal in (False, True):
            args = _inputs(d, causal)
            if versions is not None:
                result["before_vs_now"].append(_before_row(versions, args, d, causal, rounds))
            result["configs"] += _config_rows(args, d, causal, rounds)
            write_result("attention_bwd_ws", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
