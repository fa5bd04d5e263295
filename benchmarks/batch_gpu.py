"""`kernelagent batch --mode verify` over the examples and the shipped library on the GPU machine.

Each configuration (a GPU list) runs the same batch from a fresh KERNELAGENT_HOME, so nothing is cached
between them; the result file has the wall time, the KernelBench summary, each item's verdict and the
shard that verified it (one worker set per GPU, pinned with CUDA_VISIBLE_DEVICES), and whether every
configuration reached the same verdicts.

Run: `python benchmarks/batch_gpu.py` (GPU 0), `python benchmarks/batch_gpu.py 0 0,1` (one GPU, then two:
issue 21's comparison). Writes $OUT/batch_gpu.json (or benchmarks/results/batch_gpu.json).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]
INPUTS = [ROOT / "examples", ROOT / "kernelagent" / "kernels"]


def run_config(gpus: list[int], seeds: int) -> dict[str, Any]:
    """One batch on `gpus` from an empty home: wall time, summary, and every item."""
    from kernelagent.memory import batches as B
    from kernelagent.memory import open_store
    from kernelagent.tools.batch import BatchOptions, BatchRunner, discover

    with tempfile.TemporaryDirectory(prefix="ka-batch-home-") as home:
        os.environ["KERNELAGENT_HOME"] = home
        events: list[dict[str, Any]] = []
        with open_store(Path(home)) as store:
            t0 = time.perf_counter()
            summary = BatchRunner(store, discover(INPUTS), BatchOptions(device="cuda", gpus=gpus, seeds=seeds),
                                  progress=lambda e: (events.append(e), print(e, flush=True))).run()
            wall = time.perf_counter() - t0
            items = [{k: r[k] for k in ("problem", "candidate_path", "verdict", "category", "worker", "seconds",
                                        "speedup_eager", "speedup_compile", "gpu")}
                     for r in B.items(store, summary["batch_id"])]
    return {"gpus": gpus, "wall_s": round(wall, 2), "summary": summary, "items": items,
            "errors": [e for e in events if e["event"] == "error"]}


def verdicts(config: dict[str, Any]) -> dict[str, str]:
    return {f"{i['problem']}:{Path(i['candidate_path'] or '').name}": i["verdict"] or "" for i in config["items"]}


def main(argv: list[str]) -> None:
    configs = [[int(g) for g in arg.split(",")] for arg in argv] or [[0]]
    results = [run_config(gpus, seeds=3) for gpus in configs]
    same = all(verdicts(r) == verdicts(results[0]) for r in results)
    base = results[0]["wall_s"]
    speedups = {",".join(map(str, r["gpus"])): round(base / r["wall_s"], 3) for r in results}
    path = write_result("batch_gpu", {"inputs": [str(p.relative_to(ROOT)) for p in INPUTS], "configs": results,
                                      "identical_verdicts": same, "wall_speedup_vs_first": speedups})
    print(f"wrote {path}; identical verdicts: {same}; wall speedup vs first config: {speedups}")


if __name__ == "__main__":
    main(sys.argv[1:])
