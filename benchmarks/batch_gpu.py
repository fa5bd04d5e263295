"""`kernelagent batch --mode verify` over the examples and the shipped library on the GPU machine.

Each configuration (a GPU list) runs the same batch from a fresh KERNELAGENT_HOME, so nothing is cached
between them; the result file has the wall time, the KernelBench summary, each item's verdict and the
shard that verified it (one worker set per GPU, pinned with CUDA_VISIBLE_DEVICES), and whether every
configuration reached the same verdicts.

Run: `python benchmarks/batch_gpu.py` (GPU 0), `python benchmarks/batch_gpu.py 0 0,1` (one GPU, then two:
issue 21's comparison). Writes $OUT/batch_gpu.json (or benchmarks/results/batch_gpu.json) after every
verification, marked `"complete": false` until the last: a run its time limit ends still leaves each
verdict and message. BATCH_HOME=DIR uses DIR as the home of the first configuration instead of an empty
one: a batch killed there resumes in the next call (nothing verified twice; its wall time is then the
resumed part's). BATCH_INPUTS=a,b picks folders or files (relative to the repository) instead of the
examples and the library. BATCH_JOBS=N verifies N problems at once on each GPU (their checks side by side;
timings, and the references' baselines, still one at a time under the GPU lock).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import out_dir, write_result

ROOT = Path(__file__).resolve().parents[1]
INPUTS = [ROOT / "examples", ROOT / "kernelagent" / "kernels"]


ITEM_FIELDS = ("problem", "candidate_path", "verdict", "category", "worker", "seconds", "speedup_eager",
               "speedup_compile", "gpu")


def run_config(gpus: list[int], seeds: int, home: str | None = None, partial: Any = lambda config: None,
               inputs: list[Path] = INPUTS, device: str = "cuda", jobs: int | None = None) -> dict[str, Any]:
    """One batch on `gpus` from an empty home (or `home`): wall time, summary, and every item with its
    message; `partial(config)` gets the items verified so far after each verification."""
    with contextlib.ExitStack() as stack:
        if home is None:
            home = stack.enter_context(tempfile.TemporaryDirectory(prefix="ka-batch-home-"))
        return _run_in(Path(home), gpus, seeds, partial, inputs, device, jobs)


def _run_in(home: Path, gpus: list[int], seeds: int, partial: Any, inputs: list[Path], device: str,
            jobs: int | None) -> dict[str, Any]:
    from kernelagent.memory import open_store
    from kernelagent.tools.batch import BatchOptions, BatchRunner, discover

    home.mkdir(parents=True, exist_ok=True)
    os.environ["KERNELAGENT_HOME"] = str(home)
    events: list[dict[str, Any]] = []
    with open_store(home) as store:
        t0 = time.perf_counter()

        def progress(event: dict[str, Any]) -> None:
            events.append(event)
            print(event, flush=True)
            if event.get("event") == "done" and "batch_id" in _first_plan(events):
                partial({"gpus": gpus, "jobs": jobs, "wall_s": round(time.perf_counter() - t0, 2), "summary": None,
                         "items": _items(store, _first_plan(events)["batch_id"]), "errors": _errors(events)})

        summary = BatchRunner(store, discover(inputs), BatchOptions(device=device, gpus=gpus, seeds=seeds,
                                                                    jobs=jobs),
                              progress=progress).run()
        wall = time.perf_counter() - t0
        return {"gpus": gpus, "jobs": jobs, "wall_s": round(wall, 2), "summary": summary,
                "items": _items(store, summary["batch_id"]), "errors": _errors(events)}


def _first_plan(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next((e for e in events if e.get("event") == "plan"), {})


def _errors(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") == "error"]


def _items(store: Any, batch_id: str) -> list[dict[str, Any]]:
    """The batch's items, each with its attempt's one-line message (why a candidate was rejected)."""
    from kernelagent.memory import batches as B

    rows = B.items(store, batch_id)
    ids = [r["attempt_id"] for r in rows if r.get("attempt_id")]
    marks = ",".join("?" * len(ids))
    messages = {a["id"]: a["message"] for a in store.query(f"select id, message from attempts where id in ({marks})",
                                                             tuple(ids))} if ids else {}
    return [{**{k: r[k] for k in ITEM_FIELDS}, "message": messages.get(r.get("attempt_id"))} for r in rows]


def library_rows(home: Path, batch_id: str) -> list[dict[str, Any]]:
    """`library verify --json` rows for the batch's library kernels, from the reports it stored: the cards
    are filled from the batch (`kernelagent library verify --from FILE --record`) without verifying twice."""
    from kernelagent.kernels import list_entries
    from kernelagent.memory import batches as B
    from kernelagent.memory import open_store
    from kernelagent.tools.library import verify_result
    from kernelagent.verifier.report import Report

    entries = {e.path.resolve(): e for e in list_entries()}
    rows = []
    with open_store(home) as store:
        for item in B.items(store, batch_id):
            path = Path(item["candidate_path"] or "").resolve()
            entry = entries.get(path.parent)
            stored = store.attempt(item["attempt_id"]) if item.get("attempt_id") and entry else None
            if stored and stored.get("report"):
                rows.append(verify_result(entry, path.stem, Report.from_dict(stored["report"])))
    return rows


def verdicts(config: dict[str, Any]) -> dict[str, str]:
    return {f"{i['problem']}:{Path(i['candidate_path'] or '').name}": i["verdict"] or "" for i in config["items"]}


def _inputs() -> list[Path]:
    """INPUTS, or the folders and files BATCH_INPUTS lists (comma-separated, relative to the repository)."""
    listed = [p for p in os.environ.get("BATCH_INPUTS", "").split(",") if p]
    return [ROOT / p for p in listed] or INPUTS


def main(argv: list[str]) -> None:
    configs = [[int(g) for g in arg.split(",")] for arg in argv] or [[0]]
    results: list[dict[str, Any]] = []
    for n, gpus in enumerate(configs):
        def partial(config: dict[str, Any]) -> None:
            write_result("batch_gpu", {"inputs": [str(p.relative_to(ROOT)) for p in _inputs()],
                                       "configs": results + [config], "complete": False})
        home = os.environ.get("BATCH_HOME") if n == 0 else None
        jobs = int(os.environ["BATCH_JOBS"]) if os.environ.get("BATCH_JOBS") else None
        results.append(run_config(gpus, seeds=3, home=home, partial=partial, jobs=jobs, inputs=_inputs()))
    if results[0].get("summary") and os.environ.get("BATCH_HOME"):
        rows = library_rows(Path(os.environ["BATCH_HOME"]), results[0]["summary"]["batch_id"])
        (out_dir() / "library_verify_batch.json").write_text(json.dumps(rows, indent=2, default=str))
    same = all(verdicts(r) == verdicts(results[0]) for r in results)
    base = results[0]["wall_s"]
    speedups = {",".join(map(str, r["gpus"])): round(base / r["wall_s"], 3) for r in results}
    path = write_result("batch_gpu", {"inputs": [str(p.relative_to(ROOT)) for p in _inputs()], "configs": results,
                                      "identical_verdicts": same, "wall_speedup_vs_first": speedups,
                                      "complete": True})
    print(f"wrote {path}; identical verdicts: {same}; wall speedup vs first config: {speedups}")


if __name__ == "__main__":
    main(sys.argv[1:])
