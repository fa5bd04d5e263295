"""Verify a few (problem, candidate) pairs and print one line each: verdict, message and stage times.

A diagnostic for GPU sessions, where a pytest run cut off by a time limit says little.
Run: `python benchmarks/gpu_probe.py OP:KERNEL[:flags] ...`; flags joined by `,`: `dynamic` (static
policy off), `profile`, `sanitize`, `notiming`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.sandbox.pool import WorkerPool


def options(flags: set[str]) -> VerifyOptions:
    return VerifyOptions(device="auto", seeds=2, timeout=180, static_policy="dynamic" not in flags,
                         profile="profile" in flags, sanitize="sanitize" in flags, timing="notiming" not in flags)


def main(args: list[str]) -> None:
    groups: dict[frozenset[str], list[tuple[Path, Path]]] = {}
    for a in args:
        op, kernel, *rest = a.split(":")
        groups.setdefault(frozenset(rest[0].split(",") if rest else ()), []).append((Path(op), Path(kernel)))
    for flags, pairs in groups.items():
        with Verifier(options(set(flags)), pool=WorkerPool(size=1)) as v:
            for op, kernel in pairs:
                t = time.perf_counter()
                rep = v.verify(op, kernel)
                print(json.dumps({"kernel": str(kernel), "flags": sorted(flags), "category": rep.category,
                                  "seconds": round(time.perf_counter() - t, 1), "message": rep.message[:400],
                                  "metrics": {k: rep.metrics.get(k) for k in ("candidate_ms", "timing_method",
                                                                              "host_ratio", "eager_ms")},
                                  "stages": [(s.name, s.status, s.seconds, s.message[:160]) for s in rep.stages],
                                  "feedback": rep.feedback[:1200] if not rep.accepted else ""}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
