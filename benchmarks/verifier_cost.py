"""The verifier's own cost on the GPU: end-to-end verify of the Triton softmax example, timing included.

Two sizes of the same problem and candidate: the 128 MiB example and KernelBench's level-1 size (1 MiB).
first: the very first verify of a problem, which also builds the reference pack (reference outputs,
float64 reference, eager and torch.compile baselines);
cold: a fresh worker process for the candidate (torch/triton import paid), reference pack already built;
pool: a pre-started worker (imports done, waiting on stdin), as the agent uses it.
Also the import cost of a fresh process, step by step, and the unsafe minimal harness in a fresh
process (benchmarks/naive_harness.py) on the same problem, as the floor for the cold figure.
Run: `python benchmarks/verifier_cost.py [imports] [16x16384] [4096x8192]` on the GPU.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from benchmarks.common import write_result
from benchmarks.import_profile import STEPS, timed
from benchmarks.naive_harness import main as naive_harness
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "examples/softmax/kernel.py"
CASES = {"softmax_4096x8192": ROOT / "examples/softmax/op.py",
         "softmax_16x16384": ROOT / "problems/bench/softmax_16x16384.py"}
def import_costs() -> dict[str, float]:
    """One pass over benchmarks/import_profile.py's steps (that script repeats them and says more)."""
    out = {}
    for name, code in STEPS.items():
        out[name] = timed(code)
        print("import", name, out[name], flush=True)
    return out


def _wait_ready(pool: WorkerPool, limit: float = 30.0) -> None:
    t = time.monotonic()
    while time.monotonic() - t < limit:
        idle = [w for ws in pool._idle.values() for w in ws]
        if idle and all((w.workdir / "ready").exists() for w in idle):
            return
        time.sleep(0.1)


def one_case(name: str, op: Path, cold: int, pooled: int) -> dict:
    opts = VerifyOptions(device="cuda", seeds=3)
    rows: dict[str, list] = {"first": [], "cold": [], "pool": []}
    last = None
    with Verifier(opts, pool=WorkerPool(size=0)) as v:
        def once(kind: str) -> None:
            nonlocal last
            t = time.perf_counter()
            last = v.verify(op, KERNEL)
            rows[kind].append(round(time.perf_counter() - t, 3))
            print(name, kind, rows[kind][-1], last.category, last.metrics.get("cost_seconds"),
                  last.metrics.get("cost_notes"),
                  [(s.name, s.seconds) for s in last.stages], flush=True)
            assert last.accepted, last.message
        once("first")
        for _ in range(cold):
            once("cold")
        v.pool = WorkerPool(size=1)
        v.pool.warm("cuda")
        for _ in range(pooled):
            _wait_ready(v.pool)  # the replacement worker has imported, as between agent turns
            once("pool")
        v.pool.close()
    return {"seconds": rows, "median_seconds": {k: sorted(r)[len(r) // 2] for k, r in rows.items() if r},
            "stages": [(s.name, s.seconds) for s in last.stages], "breakdown": last.metrics.get("cost_seconds"),
            "notes": last.metrics.get("cost_notes"),
            "candidate_ms": last.metrics.get("candidate_ms"), "eager_ms": last.metrics.get("eager_ms")}


def main(only: list[str]) -> dict:
    """`only` picks parts by name fragment: imports, 16x16384, 4096x8192 (default: all)."""
    pick = lambda name: not only or any(o in name for o in only)  # noqa: E731
    result: dict = {"cases": {}}
    if pick("imports"):
        result["import_seconds"] = import_costs()
    for name, op in CASES.items():
        if pick(name):
            result["cases"][name] = one_case(name, op, cold=2, pooled=3)
            result["cases"][name]["naive_fresh_process"] = naive_harness(op, KERNEL)
            write_result("verifier_cost", result)
    return result


if __name__ == "__main__":
    print(main(sys.argv[1:]))
