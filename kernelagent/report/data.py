"""What a report shows, read from the memory store: a run's attempts turn by turn, or a batch's summary.

Plain dicts only, so the page builder stays a template and tests can check the numbers directly.
"""

from __future__ import annotations

from typing import Any

from kernelagent.memory.store import AmbiguousIdError, Store


class ReportNotFoundError(LookupError):
    """No run or batch has this id (or prefix)."""


def resolve(store: Store, ident: str) -> tuple[str, str]:
    """("run" | "batch", full id) for a run or batch id prefix; raises ReportNotFoundError / AmbiguousIdError."""
    run, batch = store.resolve_id("runs", ident), store.resolve_id("batches", ident)
    if run and batch:
        raise AmbiguousIdError(f"{ident!r} starts both run {run} and batch {batch}; give more characters")
    if run or batch:
        return ("run", run) if run else ("batch", batch)
    raise ReportNotFoundError(f"no run or batch {ident!r} (`kernelagent history runs` and "
                              "`kernelagent history batches` list them)")


def _metrics(a: dict[str, Any]) -> dict[str, Any]:
    return a.get("metrics") if isinstance(a.get("metrics"), dict) else {}


def attempt_point(a: dict[str, Any]) -> dict[str, Any]:
    """One attempt on the speedup chart: turn (spread by candidate), speedup and its interval."""
    ci = _metrics(a).get("speedup_eager_ci") or [None, None]
    return {"x": (a.get("turn") or 0) + 0.1 * (a.get("candidate_index") or 0), "y": a.get("speedup_eager"),
            "lo": ci[0], "hi": ci[1], "verdict": a.get("verdict"),
            "label": f"{a['id'][:8]} turn {a.get('turn')}: {a.get('verdict')} {a.get('category')}"}


def roofline_point(a: dict[str, Any]) -> dict[str, Any] | None:
    """An accepted, timed attempt as (FLOP/byte, GFLOP/s); None without FLOPs, bytes or a time."""
    m = _metrics(a)
    flops, nbytes, ms = m.get("flops"), m.get("min_bytes"), a.get("candidate_ms")
    if a.get("verdict") != "accepted" or not flops or not nbytes or not ms:
        return None
    return {"intensity": flops / nbytes, "gflops": flops / (ms * 1e-3) / 1e9, "bound": m.get("roofline_bound"),
            "label": f"{a['id'][:8]}: {ms:.4g} ms, {m.get('roofline_pct') or 0:.0f}% of the roofline"}


def progress(attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per turn: attempts, accepted, and the best accepted speedup so far (None while none was timed)."""
    best, out = None, []
    for turn in sorted({a.get("turn") or 0 for a in attempts}):
        rows = [a for a in attempts if (a.get("turn") or 0) == turn]
        speeds = [a["speedup_eager"] for a in rows if a["verdict"] == "accepted" and a.get("speedup_eager")]
        if speeds:
            best = max([best or 0.0, *speeds])
        out.append({"turn": turn, "attempts": len(rows), "accepted": sum(a["verdict"] == "accepted" for a in rows),
                    "best_speedup": best})
    return out


def _winner(store: Store, run: dict[str, Any], attempts: list[dict[str, Any]]) -> dict[str, Any] | None:
    if run.get("best_attempt_id"):
        return next((a for a in attempts if a["id"] == run["best_attempt_id"]), None) or \
            store.attempt(run["best_attempt_id"])
    accepted = [a for a in attempts if a["verdict"] == "accepted"]
    return max(accepted, key=lambda a: a.get("speedup_eager") or 0.0) if accepted else None


def ceilings_for(gpu: str | None) -> dict[str, Any]:
    """The GPU's measured ceilings (or the verifier's fallback table), for the roofline's roofs."""
    from kernelagent.verifier.measure.ceilings import load_ceilings

    return load_ceilings(gpu)


def run_data(store: Store, run_id: str) -> dict[str, Any]:
    """Everything the report of one run shows."""
    run = store.run(run_id)
    if run is None:
        raise ReportNotFoundError(f"no run {run_id!r}")
    problem = store.query("select name from problems where id = ?", (run["problem_id"],))
    attempts = store.attempts_for_run(run["id"])
    gpu = next((a["gpu"] for a in attempts if a.get("gpu")), None)
    return {"kind": "run", "run": run, "problem": problem[0]["name"] if problem else "", "attempts": attempts,
            "progress": progress(attempts), "points": [attempt_point(a) for a in attempts],
            "roofline": [p for p in map(roofline_point, attempts) if p], "gpu": gpu,
            "ceilings": ceilings_for(gpu) if gpu else None, "winner": _winner(store, run, attempts),
            "exchanges": len(store.exchanges(run["id"], limit=100000))}


def batch_data(store: Store, batch_id: str) -> dict[str, Any]:
    """Everything the report of one batch shows: its summary and per-problem rows."""
    from kernelagent.memory import batches as B

    row = B.batch(store, batch_id)
    if row is None:
        raise ReportNotFoundError(f"no batch {batch_id!r}")
    summary = B.summary_of(store, row["id"])
    return {"kind": "batch", "batch": row, "summary": summary,
            "speedups": [p["speedup_eager"] for p in summary["per_problem"] if p["speedup_eager"]],
            "speedups_compile": [p["speedup_compile"] for p in summary["per_problem"] if p["speedup_compile"]]}
