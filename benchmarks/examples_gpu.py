"""Verify every example kernel (Triton and CuTe DSL) on the GPU with timing, in one Verifier.

Records verdicts, timings against PyTorch eager and torch.compile (same method, same run) and % of the
roofline. Run: `python benchmarks/examples_gpu.py` on the GPU machine.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from benchmarks.common import METHOD, write_result
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("candidate_ms", "candidate_iqr_ms", "eager_ms", "compile_ms", "speedup_eager", "speedup_eager_ci",
        "speedup_compile", "speedup_compile_ci", "roofline_pct", "roofline_bound", "roofline_floor_ms", "rel_l2",
        "trials", "timing_method", "ceilings_source")


def pairs(only: list[str]) -> list[tuple[Path, Path]]:
    out = []
    for op in sorted(ROOT.glob("examples/*/op.py")):
        for k in sorted(op.parent.glob("kernel*.py")):
            if not only or any(o in str(k) for o in only):
                out.append((op, k))
    return out


def main(only: list[str]) -> dict:
    rows = []
    with Verifier(VerifyOptions(device="cuda", seeds=3, timeout=600), pool=WorkerPool(size=1)) as v:
        for op, kernel in pairs(only):
            t = time.perf_counter()
            rep = v.verify(op, kernel)
            row = {"example": str(kernel.relative_to(ROOT)), "verdict": rep.verdict, "category": rep.category,
                   "message": rep.message[:300], "seconds": round(time.perf_counter() - t, 2),
                   **{k: rep.metrics.get(k) for k in KEYS}}
            if not rep.accepted:
                row["feedback"] = rep.feedback[:1500]
            rows.append(row)
            print(row, flush=True)
            write_result("examples_gpu", _result(rows))  # after each example: a cut-off run keeps its rows
    return _result(rows)


def _result(rows: list[dict]) -> dict:
    return {"method": METHOD, "peers": ["torch eager", "torch.compile (default mode)"], "rows": rows}


if __name__ == "__main__":
    main(sys.argv[1:])
