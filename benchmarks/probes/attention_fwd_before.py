"""Probe (H200): the Triton attention forward against an older version of itself in one process, B=2 H=16 S=8192
bf16, D=128 and 64, causal and not, both autotuned: each version's time (triton.testing.do_bench median, warmup
25 ms, rep 100 ms, L2 flushed) over KA_PROBE_ROUNDS rounds (default 3, the versions in turn, since one process's
forward timings drift), the configs the autotuners picked, and the outputs' and lse's differences between the two.
BEFORE=path/to/an/older/triton.py names the older file (e.g. `git show REV:kernelagent/kernels/attention/triton.py
> old.py`). KA_PROBE_CAUSAL_ONLY=1 times the causal cases only. Writes attention_fwd_before.json
(benchmarks.common.write_result: $OUT or benchmarks/results).

  source .carry/setup.sh && BEFORE=old.py PYTHONPATH=$PWD python3 benchmarks/probes/attention_fwd_before.py
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

from benchmarks.common import load_module, write_result  # noqa: E402
from benchmarks.common import median_ms as _ms  # noqa: E402
from kernelagent.kernels.attention import triton as current  # noqa: E402

B, S, H = 2, 8192, 16
METHOD = ("triton.testing.do_bench median (warmup 25 ms, rep 100 ms, L2 flushed) after a first (compiling, "
          "autotuning) call; the versions timed in turn each round")


def _picked(mod) -> str | None:
    tuner = getattr(mod, "_FWD", None)
    cache = getattr(tuner, "cache", None)
    return str(list(cache.values())[-1]) if cache else None


def _caller(mod, qkv, d: int, window):
    def call():
        return mod._fwd_launch(*qkv, None, None, S, S, d ** -0.5, None, window)
    return call


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def main() -> int:
    before = load_module(os.environ["BEFORE"], "attention_triton_before")
    versions = {"before": before, "now": current}
    rounds = int(os.environ.get("KA_PROBE_ROUNDS", "3"))
    rows = []
    for d in (128, 64):
        gen = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, S, H, d, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (True,) if os.environ.get("KA_PROBE_CAUSAL_ONLY") else (False, True):
            window = (None, 0) if causal else (None, None)
            calls = {name: _caller(mod, (q, k, v), d, window) for name, mod in versions.items()}
            outs = {name: call() for name, call in calls.items()}
            row = {"d": d, "causal": causal, "ms": {name: [] for name in calls},
                   "rel_out_now_vs_before": _rel(outs["now"][0], outs["before"][0]),
                   "max_abs_lse_now_vs_before": float((outs["now"][1] - outs["before"][1]).abs().max())}
            for _ in range(rounds):
                for name, call in calls.items():
                    row["ms"][name].append(_ms(call))
            flops = 4 * B * H * S * S * d / (2 if causal else 1)
            row["tflops_median"] = {name: flops / statistics.median(ms) / 1e9 for name, ms in row["ms"].items()}
            row["picked"] = {name: _picked(mod) for name, mod in versions.items()}
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_result("attention_fwd_before", {"method": METHOD, "shape": [B, S, H], "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
