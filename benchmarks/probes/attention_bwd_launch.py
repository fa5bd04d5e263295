"""Probe (H200): the fused CuTe backward kernel launched by base pointers and sizes (`dense`, what it does on
row-major inputs since the twenty-first session) against the DLPack launch (what it did before), on the same
row-major inputs in one process: each launch's kernel time (triton.testing.do_bench median, warmup 25 ms, rep
100 ms, L2 flushed) over KA_PROBE_ROUNDS alternating rounds (default 3), host microseconds a call (200 calls back
to back, then one synchronisation), and whether the two give the same dK, dV (bit for bit) and dQ accumulator
(summed in the order the key blocks arrive, so close, not identical). Shapes: the headline (2, 8192, 16, 128) bf16
causal and not, its d64 twin, and a short one (32, 512, 16, 128). Writes attention_bwd_launch.json ($OUT or
benchmarks/results).

  source .carry/setup.sh && PYTHONPATH=$PWD python3 benchmarks/probes/attention_bwd_launch.py
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

from benchmarks.common import median_ms, write_result  # noqa: E402
from benchmarks.probes.attention_host_cost import host_us  # noqa: E402
from kernelagent.kernels.attention import cute as ac  # noqa: E402

METHOD = ("fused_kernel alone (statistics table and buffers made once): triton.testing.do_bench median (warmup 25 "
          "ms, rep 100 ms, L2 flushed), the two launches in turn each round; host_us: 200 calls back to back timed "
          "on the host, then one synchronisation")
CASES = [((2, 8192, 16, 128), False), ((2, 8192, 16, 128), True), ((2, 8192, 16, 64), False),
         ((32, 512, 16, 128), False)]


def _inputs(shape, causal: bool):
    b, s, h, d = shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(b, s, h, d, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    window = (None, 0) if causal else (None, None)
    out, _, stats = ac.attention_forward(q, k, v, d ** -0.5, None, window)
    tab = ac._stats_table(do, out, stats, None)
    return q, k, v, do, tab, window


def _case(shape, causal: bool, rounds: int) -> dict:
    q, k, v, do, tab, window = _inputs(shape, causal)
    scale = shape[3] ** -0.5
    results, calls = {}, {}
    for dense in (True, False):
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        bufs = ac.fused_buffers(q, tab)
        ac.fused_kernel(q, k, v, do, tab, dk, dv, *bufs, scale, window, dense=dense)
        torch.cuda.synchronize()
        name = "pointers" if dense else "dlpack"
        results[name] = (dk.clone(), dv.clone(), bufs[0].clone())
        calls[name] = (lambda dk=dk, dv=dv, bufs=bufs, dense=dense:
                       ac.fused_kernel(q, k, v, do, tab, dk, dv, *bufs, scale, window, dense=dense))
    (pk, pv, pa), (lk, lv, la) = results["pointers"], results["dlpack"]
    row = {"shape": list(shape), "causal": causal, "dk_dv_identical": bool(torch.equal(pk, lk) and torch.equal(pv, lv)),
           "rel_dq_acc": float((pa - la).double().norm() / la.double().norm().clamp_min(1e-30)),
           "ms": {name: [] for name in calls}, "host_us": {}}
    for _ in range(rounds):
        for name, call in calls.items():
            row["ms"][name].append(median_ms(call))
    row["ms_median"] = {name: statistics.median(ms) for name, ms in row["ms"].items()}
    row["host_us"] = {name: host_us(call) for name, call in calls.items()}
    return row


def main() -> int:
    rounds = int(os.environ.get("KA_PROBE_ROUNDS", "3"))
    rows = []
    for shape, causal in CASES:
        rows.append(_case(shape, causal, rounds))
        print(json.dumps(rows[-1]), flush=True)
        write_result("attention_bwd_launch", {"method": METHOD, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
