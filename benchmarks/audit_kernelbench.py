"""Audit KernelBench levels 1-3 under KernelBench's own check: which problems does a trivial answer pass?

Run (on the GPU machine): `python -m benchmarks.audit_kernelbench PATH/TO/KernelBench/KernelBench --jobs 8`
where the path holds the level folders as KernelBench ships them. Every problem is audited in its own
child (`kernelagent audit` machinery) on the GPU, with `--tolerance kernelbench` (torch.allclose,
atol = rtol = 1e-2) by default. Writes to $OUT (or benchmarks/results/):
  audit_kernelbench.json          the results document of every problem (written as each finishes, so a
                                  run cut short keeps what it did; run again with --out to resume)
  audit_kernelbench_summary.json  the flagged problems with the trivial answers that pass, the ones not
                                  audited and why, and the memory outcome (processes killed for memory,
                                  estimate against measured peak)
Expected: about 5 minutes for the 250 problems on one H200 with 16 cores and --jobs 8 (a child starts in
3-5 s; most audits take seconds; the largest inputs, 8-16 GB, run one at a time by the memory budget).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import environment, out_dir
from kernelagent.verifier.audit.folder import audit_folder
from kernelagent.verifier.audit.problem import resolve_device
from kernelagent.verifier.audit.settings import AuditSettings, tolerance_from


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path, help="KernelBench's folder holding level1, level2, level3")
    p.add_argument("--levels", default="1,2,3")
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--tolerance", default="kernelbench")
    p.add_argument("--draws", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per problem")
    p.add_argument("--device", default="auto")
    p.add_argument("--out", type=Path, default=None, help="results file (resume from it); default in $OUT")
    return p.parse_args()


def _ratios(problems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How the memory estimates compared with the peaks measured in the children."""
    rows = []
    for rel, r in problems.items():
        mem = r.get("memory") or {}
        est = mem.get("estimate") or {}
        for kind, peak_key, est_key in (("host", "peak_host_bytes", "host_bytes"),
                                        ("device", "peak_device_bytes", "device_bytes")):
            if mem.get(peak_key) and est.get(est_key):
                rows.append((mem[peak_key] / est[est_key], kind, rel, mem.get("sizes", {}).get("source")))
    over = sorted((row for row in rows if row[0] > 1.0), reverse=True)
    return {"compared": len(rows), "peak_over_estimate": [{"ratio": round(x, 2), "kind": k, "problem": p,
                                                           "sized_by": s} for x, k, p, s in over[:30]],
            "max_ratio": round(max((row[0] for row in rows), default=0.0), 3)}


def _summary(doc: dict[str, Any], seconds: float) -> dict[str, Any]:
    problems, s = doc["problems"], doc["summary"]
    flagged = [{"problem": f["problem"], "trivial_answers_that_pass": f["trivial_answers_that_pass"],
                "variation": f["variation"], "reasons": f["reasons"]} for f in s["flagged"]]
    memory = {"killed_for_memory": s["killed_for_memory"],
              "oom": [f for f in s["not_audited"] if f["status"] == "oom"],
              "refused": [f for f in s["not_audited"] if f["status"] == "refused"],
              "estimates": _ratios(problems)}
    return {"root": doc["root"], "settings": doc["settings"], "seconds": round(seconds, 1),
            "problems": s["problems"], "by_status": s["by_status"], "degenerate": s["degenerate"],
            "flagged": flagged, "not_audited": s["not_audited"], "memory": memory,
            "edge_case_notes": s["edge_case_notes"]}


def main() -> None:
    a = _args()
    levels = {f"level{x.strip()}" for x in a.levels.split(",") if x.strip()}
    settings = AuditSettings(device=resolve_device(a.device), draws=a.draws, tolerance=tolerance_from(a.tolerance),
                             timeout=a.timeout, threads=max(1, (os.cpu_count() or 1) // max(1, a.jobs)))
    out = a.out or out_dir() / "audit_kernelbench.json"
    t0 = time.monotonic()
    done = [0]

    def progress(event: str, info: dict[str, Any]) -> None:
        if event == "start":
            print(f"{info['total']} problems, {info['todo']} to audit -> {info['out']}", flush=True)
        elif event == "done":
            done[0] += 1
            r = info["result"]
            what = ", ".join(r.get("trivial_answers_that_pass") or []) if r.get("degenerate") else ""
            print(f"[{done[0]}] {time.monotonic() - t0:6.0f}s {info['problem']}: {r.get('status')}"
                  f"{' DEGENERATE ' + what if r.get('degenerate') else ''}"
                  f"{' ' + str(r.get('error', ''))[:160] if r.get('status') != 'ok' else ''}", flush=True)

    doc = audit_folder(a.root, settings, a.jobs, out, progress=progress,
                       select=lambda rel: Path(rel).parts[0] in levels)
    summary = {"benchmark": "audit_kernelbench", "environment": environment(),
               **_summary(doc, time.monotonic() - t0)}
    path = out_dir() / "audit_kernelbench_summary.json"
    path.write_text(json.dumps(summary, indent=2, default=str))
    print(f"{summary['problems']} problems, {summary['degenerate']} degenerate, by status {summary['by_status']}, "
          f"killed for memory {summary['memory']['killed_for_memory']} -> {path}")
    sys.exit(0)


if __name__ == "__main__":
    main()
