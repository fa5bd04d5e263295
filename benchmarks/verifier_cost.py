"""The verifier's own cost on the GPU: end-to-end verify of the Triton softmax example, timing included.

cold: fresh worker processes for the candidate (torch/triton import paid), reference pack already built;
pool: a pre-started worker (imports done, waiting on stdin), as the agent uses it;
first: the very first verify of a problem, which also builds the reference pack (reference outputs,
float64 reference, eager and torch.compile baselines).
Run: `python benchmarks/verifier_cost.py` on the GPU machine.
"""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.common import write_result
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.pool import WorkerPool

ROOT = Path(__file__).resolve().parents[1]
OP, KERNEL = ROOT / "examples/softmax/op.py", ROOT / "examples/softmax/kernel.py"


def main(repeats: int = 3) -> dict:
    opts = VerifyOptions(device="cuda", seeds=3)
    rows = {"first": [], "cold": [], "pool": []}
    with Verifier(opts, pool=WorkerPool(size=0)) as v:
        t = time.perf_counter()
        rep = v.verify(OP, KERNEL)
        rows["first"].append(time.perf_counter() - t)
        print("first", round(rows["first"][-1], 2), rep.category, [(s.name, s.seconds) for s in rep.stages], flush=True)
        assert rep.accepted, rep.message
        for _ in range(repeats):
            t = time.perf_counter()
            rep = v.verify(OP, KERNEL)
            rows["cold"].append(time.perf_counter() - t)
            print("cold", round(rows["cold"][-1], 2), rep.category, rep.metrics.get("cost_seconds"), flush=True)
        v.pool = WorkerPool(size=1)
        v.pool.warm("cuda")
        for _ in range(repeats):
            time.sleep(8)  # let the replacement worker finish importing, as between agent turns
            t = time.perf_counter()
            rep = v.verify(OP, KERNEL)
            rows["pool"].append(time.perf_counter() - t)
            print("pool", round(rows["pool"][-1], 2), rep.category, rep.metrics.get("cost_seconds"), flush=True)
        v.pool.close()
    result = {"seconds": rows, "median_seconds": {k: sorted(r)[len(r) // 2] for k, r in rows.items() if r},
              "verdict": rep.verdict, "stages": [(s.name, s.seconds) for s in rep.stages],
              "candidate_ms": rep.metrics.get("candidate_ms"), "eager_ms": rep.metrics.get("eager_ms"),
              "last_breakdown": rep.metrics.get("cost_seconds")}
    write_result("verifier_cost", result)
    return result


if __name__ == "__main__":
    print(main())
