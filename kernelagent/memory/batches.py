"""Batches in the store: one row per batch, one per (problem, candidate) done, and the summary in
KernelBench's terms (correct %, fast_p, geometric-mean speedup) computed from those rows alone.

A batch's identity is a hash of its mode, inputs and options, so running the same command again finds
the batch and continues it: an item already in `batch_items` is never verified or bought again.
Verifications (a CLI `verify`, a batch candidate) are runs of kind `verify` with one attempt each.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import sqlite_utils

from kernelagent.memory.store import Store, _dumps, _new_id, now_iso, problem_hash, source_sha256
from kernelagent.verifier.report import Report

FAST_P = (0.0, 1.0, 1.5)
NO_CANDIDATE = "no_candidate"
UNVERIFIED = "unverified"  # the verdict of a kernel that compiled but could not be run (no GPU): never correct


def batch_key(mode: str, inputs: list[str], options: dict[str, Any]) -> str:
    """Identity of a batch: the same mode, inputs and options give the same key."""
    text = json.dumps({"mode": mode, "inputs": sorted(inputs), "options": options}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def open_batch(store: Store, *, mode: str, inputs: list[str], options: dict[str, Any], new: bool = False,
               resume: str | None = None) -> tuple[str, bool]:
    """The batch to run: `resume` (an id or prefix), else the newest with the same key, else a new one.

    Returns (batch id, whether it continues an earlier one). `new=True` always starts a fresh batch.
    Raises LookupError for an unknown `resume` id.
    """
    if resume:
        full = store.resolve_id("batches", resume)
        if full is None:
            raise LookupError(f"no batch {resume!r}; `kernelagent history batches` lists them")
        return full, True
    key = batch_key(mode, inputs, options)
    if not new:
        row = store.query("select id from batches where key = ? order by started desc, rowid desc limit 1", (key,))
        if row:
            return row[0]["id"], True
    bid = _new_id()
    store.write(lambda db: db.table("batches").insert(
        {"id": bid, "key": key, "mode": mode, "inputs": _dumps(sorted(inputs)), "options": _dumps(options),
         "status": "running", "started": now_iso(), "finished": None, "summary": None}))
    return bid, False


def batch(store: Store, batch_id: str) -> dict[str, Any] | None:
    """One batch by id or unique prefix, with its options, inputs and last summary decoded."""
    full = store.resolve_id("batches", batch_id)
    if full is None:
        return None
    row = store.query("select * from batches where id = ?", (full,))[0]
    for key in ("inputs", "options", "summary"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    return row


def batches(store: Store, limit: int = 20) -> list[dict[str, Any]]:
    """Newest batches first, with how many items each has done."""
    return store.query("select b.id, b.mode, b.status, b.started, b.finished, count(i.batch_id) as items "
                       "from batches b left join batch_items i on i.batch_id = b.id group by b.id "
                       "order by b.started desc, b.rowid desc limit ?", (limit,))


def done_keys(store: Store, batch_id: str) -> set[tuple[str, str]]:
    """(problem id, candidate sha) of every item this batch has finished."""
    rows = store.query("select problem_id, candidate_sha from batch_items where batch_id = ?", (batch_id,))
    return {(r["problem_id"], r["candidate_sha"]) for r in rows}


def problem_run(store: Store, batch_id: str, problem_id: str) -> str | None:
    """The run this batch opened for a problem (verify mode: one run holds the problem's candidates)."""
    rows = store.query("select id from runs where batch_id = ? and problem_id = ? order by started limit 1",
                       (batch_id, problem_id))
    return rows[0]["id"] if rows else None


def record_verification(store: Store, *, problem_path: str | Path, problem_name: str, candidate_source: str,
                        report: Report | dict[str, Any], batch_id: str | None = None,
                        candidate_path: str | None = None, worker: str = "", seconds: float = 0.0) -> str:
    """Write one verification as an attempt of a `verify` run, and as a batch item when `batch_id` is given.

    One transaction: a killed batch never holds an attempt without its item. Returns the attempt id.
    """
    rep = report.to_dict() if isinstance(report, Report) else dict(report)
    problem_source = Path(problem_path).read_text(encoding="utf-8")
    pid = store.upsert_problem(name=problem_name, source=problem_source)
    backend = (rep.get("candidate") or {}).get("backend") or ""

    def write(db: sqlite_utils.Database) -> str:
        run_id = problem_run(store, batch_id, pid) if batch_id else None
        if run_id is None:
            run_id = store.start_run(problem_id=pid, provider="", model="", backend=backend, budget={},
                                     kind="verify", batch_id=batch_id, problem_path=str(problem_path))
        aid = store.record_attempt(run_id=run_id, problem_id=pid, source=candidate_source, report=rep)
        accepted = rep.get("verdict") == "accepted"
        best = store.run(run_id)["best_attempt_id"]
        store.update_run(run_id, status="finished", finished=True,
                         **({"best_attempt_id": aid} if accepted and best is None else {}))
        if batch_id:
            db.table("batch_items").upsert(_item(batch_id, pid, source_sha256(candidate_source), problem_path,
                                                 candidate_path, problem_name, run_id, aid, rep, worker, seconds),
                                           pk=("batch_id", "problem_id", "candidate_sha"))
        return aid

    return store.write(write)


def record_item(store: Store, *, batch_id: str, problem_path: str | Path, problem_name: str,
                status: str, run_id: str | None = None, attempt_id: str | None = None,
                verdict: str | None = None, category: str | None = None, worker: str = "",
                seconds: float = 0.0) -> None:
    """Write an item that is not one verification: a problem without candidates, or an optimize run."""
    source = Path(problem_path).read_text(encoding="utf-8")
    pid = problem_hash(source) if run_id is None else store.run(run_id)["problem_id"]
    rep = {"verdict": verdict, "category": category}
    row = _item(batch_id, pid, "", problem_path, None, problem_name, run_id, attempt_id, rep, worker, seconds)
    row["status"] = status
    store.write(lambda db: db.table("batch_items").upsert(row, pk=("batch_id", "problem_id", "candidate_sha")))


def _item(batch_id: str, pid: str, sha: str, problem_path: str | Path, candidate_path: str | None, name: str,
          run_id: str | None, attempt_id: str | None, rep: dict[str, Any], worker: str,
          seconds: float) -> dict[str, Any]:
    return {"batch_id": batch_id, "problem_id": pid, "candidate_sha": sha, "problem_path": str(problem_path),
            "candidate_path": candidate_path, "problem": name, "run_id": run_id, "attempt_id": attempt_id,
            "status": "done", "verdict": rep.get("verdict"), "category": rep.get("category"),
            "seconds": round(seconds, 3), "worker": worker, "created": now_iso()}


def finish_batch(store: Store, batch_id: str, summary: dict[str, Any]) -> None:
    store.write(lambda db: db.table("batches").update(
        batch_id, {"status": "finished", "finished": now_iso(), "summary": _dumps(summary)}))


def items(store: Store, batch_id: str) -> list[dict[str, Any]]:
    """Every item of a batch with its attempt's timings, in problem-path order."""
    return store.query(
        "select i.*, a.speedup_eager, a.speedup_compile, a.candidate_ms, a.eager_ms, a.compile_ms, a.gpu, "
        "a.metrics from batch_items i left join attempts a on a.id = i.attempt_id where i.batch_id = ? "
        "order by i.problem_path, i.candidate_path, i.candidate_sha", (batch_id,))


def _best(group: list[dict[str, Any]]) -> dict[str, Any] | None:
    accepted = [r for r in group if r["verdict"] == "accepted"]
    return max(accepted, key=lambda r: (r["speedup_eager"] or 0.0, r["candidate_path"] or "")) if accepted else None


def _per_problem(group: list[dict[str, Any]]) -> dict[str, Any]:
    best = _best(group)
    tried = [r for r in group if r["status"] != NO_CANDIDATE]
    failed = Counter(r["category"] for r in tried if r["verdict"] not in ("accepted", UNVERIFIED))
    unverified = sum(r["verdict"] == UNVERIFIED for r in tried)
    return {"problem": group[0]["problem"], "problem_path": group[0]["problem_path"],
            "problem_id": group[0]["problem_id"], "candidates": len(tried), "correct": best is not None,
            "unverified": unverified,
            "best_attempt": best["attempt_id"] if best else None,
            "best_candidate": best["candidate_path"] if best else None,
            "speedup_eager": best["speedup_eager"] if best else None,
            "speedup_compile": best["speedup_compile"] if best else None,
            "failures": dict(sorted(failed.items()))}


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _speed_block(problems: list[dict[str, Any]], key: str, n: int) -> dict[str, Any]:
    """fast_p against one baseline: the share of evaluated problems correct and more than p times faster."""
    correct = [p for p in problems if p["correct"]]
    measured = [p[key] for p in correct if p[key] is not None]
    block: dict[str, Any] = {"measured": len(measured)}
    for p in FAST_P:
        label = f"fast_{p:g}"
        if p == 0.0:
            block[label] = len(correct) / n if n else None  # KernelBench: fast_0 is the correct share
        else:
            block[label] = sum(1 for v in measured if v > p) / n if n and measured else None
    block["geomean_speedup"] = _geomean(measured)
    return block


def summarize(rows: list[dict[str, Any]], batch_id: str = "", mode: str = "") -> dict[str, Any]:
    """The batch in KernelBench's terms, from its item rows (deterministic: a resumed batch gives the same).

    Shares are over evaluated problems (those with at least one candidate); without GPU timings the
    fast_1 / fast_1.5 / geomean entries are None ("not measured"). `unverified` counts the problems with no
    correct kernel whose candidates include one that compiled but could not be run (no GPU): not correct,
    and not among the failures either.
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["problem_id"], []).append(r)
    problems = sorted((_per_problem(g) for g in groups.values()), key=lambda p: (p["problem_path"], p["problem"]))
    evaluated = [p for p in problems if p["candidates"]]
    n = len(evaluated)
    correct = sum(p["correct"] for p in evaluated)
    unverified = sum(1 for p in evaluated if not p["correct"] and p["unverified"])
    failures = Counter()
    for p in evaluated:
        failures.update(p["failures"])
    eager, compiled = _speed_block(evaluated, "speedup_eager", n), _speed_block(evaluated, "speedup_compile", n)
    return {"batch_id": batch_id, "mode": mode, "problems": len(problems), "evaluated": n,
            "no_candidate": len(problems) - n, "candidates": sum(p["candidates"] for p in problems),
            "correct": correct, "correct_pct": 100.0 * correct / n if n else None, "unverified": unverified,
            "speed_measured": bool(eager["measured"] or compiled["measured"]), "eager": eager,
            "compile": compiled, "failures": dict(sorted(failures.items())), "per_problem": problems}


def summary_of(store: Store, batch_id: str) -> dict[str, Any]:
    """The summary of a batch as its rows stand now."""
    row = batch(store, batch_id)
    if row is None:
        raise LookupError(f"no batch {batch_id!r}")
    return summarize(items(store, row["id"]), row["id"], row["mode"])


def log_verify(problem_path: str | Path, candidate_path: str | Path, report: Report | dict[str, Any],
               store: Store | None = None) -> str:
    """Record a CLI `verify` as a verify run with one attempt (the call `kernelagent verify` makes); its id."""
    from kernelagent.memory.store import open_store
    from kernelagent.problem import problem_name

    own = store is None
    store = store or open_store()
    try:
        return record_verification(store, problem_path=problem_path, problem_name=problem_name(problem_path),
                                   candidate_source=Path(candidate_path).read_text(encoding="utf-8"), report=report,
                                   candidate_path=str(candidate_path))
    finally:
        if own:
            store.close()
