"""Checks the timing method: against triton.testing.do_bench on the same kernels (same L2 flush, median),
and its spread over 10 repeated measurements of one kernel.
Run: `python benchmarks/timing_method.py` on the GPU machine.
"""

from __future__ import annotations

import statistics

import torch
import triton.testing

from benchmarks.common import METHOD, write_result
from kernelagent.verifier.measure.timing import measure


def kernels() -> dict:
    x = torch.randn(8192, 8192, device="cuda")
    xb = torch.randn(32768, 8192, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    small = torch.randn(1024, device="cuda")
    return {"softmax fp32 8192x8192": lambda: torch.softmax(x, -1),
            "rmsnorm bf16 32768x8192": lambda: torch.nn.functional.rms_norm(xb, (8192,)),
            "matmul bf16 4096^3": lambda: a @ a,
            "add 1024 (tiny, graph-timed)": lambda: small + 1}


def main() -> dict:
    rows = []
    for name, fn in kernels().items():
        ours = measure([fn])
        theirs = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
        rows.append({"kernel": name, "ours_ms": ours.median_ms, "ours_method": ours.method, "do_bench_ms": theirs,
                     "diff_pct": 100 * (ours.median_ms - theirs) / theirs})
    fn = kernels()["softmax fp32 8192x8192"]
    reps = [measure([fn]).median_ms for _ in range(10)]
    spread = {"medians_ms": reps, "min": min(reps), "max": max(reps),
              "spread_pct": 100 * (max(reps) - min(reps)) / statistics.median(reps),
              "stdev_pct": 100 * statistics.stdev(reps) / statistics.mean(reps)}
    result = {"method": METHOD, "versus_do_bench": rows, "repeat_10": spread,
              "note": "do_bench(warmup=25, rep=200, return_mode='median') flushes L2 the same way; tiny kernels are "
                      "graph-replayed by ours and event-timed by do_bench, so they differ by launch overhead"}
    write_result("timing_method", result)
    return result


if __name__ == "__main__":
    print(main())
