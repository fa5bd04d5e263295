"""The `verify` node: each new candidate file checked once, recorded the moment its report arrives.

Candidates run through `verify_fn` from a thread pool (the verifier runs each in its own process and
serialises GPU timing itself). A source already recorded for this run (same sha256) is not verified
again: its stored report is reused, which is also what makes a resumed run skip finished work.
The options carry the run's backend (a candidate in the other language is rejected by the verifier)
and, under a GPU-second budget, a timeout no longer than what is left of it.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from langgraph.runtime import Runtime

from kernelagent.agent.budget import Limits, gpu_seconds_left
from kernelagent.agent.deps import RunContext
from kernelagent.agent.scoring import metric
from kernelagent.agent.state import AgentState, Candidate
from kernelagent.agent.text import strip_ansi
from kernelagent.problem import sha256_text
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.report import Report, rejected


def _report_of(row: dict[str, Any]) -> dict[str, Any]:
    """The report dict stored with an attempt row (decoded JSON, or rebuilt from its columns)."""
    report = row.get("report")
    if isinstance(report, dict):
        return report
    return Report(verdict=row.get("verdict", "rejected"), category=row.get("category", "internal_error"),
                  message=row.get("message", ""), feedback=row.get("feedback", ""),
                  metrics=row.get("metrics") or {}).to_dict()


def options_for(ctx: RunContext, backend: str, used: float, parallel: int) -> VerifyOptions | None:
    """The verifier's options for this turn, or None when the GPU-second budget is spent."""
    left = gpu_seconds_left(Limits(gpu_seconds=ctx.config.budget_gpu_s), used)
    base = dataclasses.replace(ctx.deps.verify_options, backend=backend)
    if left is None:
        return base
    if left <= 0:
        return None
    return dataclasses.replace(base, timeout=min(base.timeout, left / max(1, parallel)))


def _call_verify(ctx: RunContext, problem_path: str, path: str,
                 options: VerifyOptions) -> tuple[dict[str, Any], float]:
    """Run verify_fn; its own failure becomes an internal_error report that blames the verifier."""
    start = time.monotonic()
    try:
        report = ctx.deps.verify_fn(problem_path, path, options)
    except Exception as error:  # noqa: BLE001 - any verifier bug is reported as such, never as the candidate's
        report = rejected("internal_error", f"the verifier raised {type(error).__name__}: {error}",
                          blame="verifier")
    return report.to_dict(), time.monotonic() - start


def _write(ctx: RunContext, cand: Candidate) -> str:
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    path = ctx.workdir / f"t{cand['turn']:02d}_c{cand['index']}.py"
    path.write_text(cand["source"] or "", encoding="utf-8")
    return str(path)


def _record(ctx: RunContext, state: AgentState, cand: Candidate) -> str | None:
    store = ctx.deps.store
    if store is None:
        return None
    return store.record_attempt(run_id=state["run_id"], problem_id=state.get("problem_id"),
                                source=cand["source"], report=cand["report"], turn=cand["turn"],
                                parent_id=cand["parent_id"], candidate_index=cand["index"],
                                tokens=cand["tokens"]["input"] + cand["tokens"]["output"],
                                cost_usd=cand["cost_usd"])


def _known(ctx: RunContext, state: AgentState, sha: str) -> dict[str, Any] | None:
    store = ctx.deps.store
    return store.find_attempt_by_source(state["run_id"], sha) if store is not None else None


def verify(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Verify this turn's new candidates; reuse the verdict of any source this run already recorded."""
    ctx = runtime.context
    cands = [Candidate(**c) for c in state["candidates"]]
    groups: dict[str, list[Candidate]] = {}
    for c in cands:
        if c["source"] is not None:
            groups.setdefault(sha256_text(c["source"]), []).append(c)
    todo = []
    for sha, members in groups.items():
        row = _known(ctx, state, sha)
        if row is None:
            todo.append(members)
            continue
        earlier = (f"t{row.get('turn')}c{row.get('candidate_index') or 0}"
                   if (row.get("turn") or 0) < state["turn"] else None)
        for c in members:
            c.update(report=_report_of(row), attempt_id=row["id"], reused_from=earlier)
            _emit_verified(ctx, c, reused=True)
    seconds = _verify_new(ctx, state, todo)
    rows = [history_row(c) for c in cands]
    return {"candidates": cands, "history": rows, "verify_seconds": state["verify_seconds"] + seconds}


def _verify_new(ctx: RunContext, state: AgentState, todo: list[list[Candidate]]) -> float:
    """Verify one candidate per group in parallel, recording each as soon as its report is back."""
    if not todo:
        return 0.0
    workers = max(1, min(len(todo), ctx.config.verify_workers))
    options = options_for(ctx, state["backend"], state["verify_seconds"], workers)
    if options is None:
        for members in todo:
            for c in members:
                c["error"] = "budget"
        return 0.0
    ctx.emit("stage", stage=f"turn {state['turn']}: verifying {len(todo)} candidate(s)")
    total = 0.0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {}
        for members in todo:
            members[0]["path"] = _write(ctx, members[0])
            futures[pool.submit(_call_verify, ctx, state["problem_path"], members[0]["path"], options)] = members
        for future in as_completed(futures):
            members = futures[future]
            report, seconds = future.result()
            total += seconds
            members[0]["report"] = report
            attempt_id = _record(ctx, state, members[0])
            for c in members:
                c.update(report=report, attempt_id=attempt_id, path=members[0]["path"])
                _emit_verified(ctx, c, reused=False, seconds=seconds)
    return total


def _emit_verified(ctx: RunContext, c: Candidate, *, reused: bool, seconds: float = 0.0) -> None:
    r = c["report"] or {}
    ctx.emit("verified", turn=c["turn"], index=c["index"], verdict=r.get("verdict"),
             category=r.get("category"), message=r.get("message", ""), speedup=metric(r, "speedup_eager"),
             candidate_ms=metric(r, "candidate_ms"), reused=reused, seconds=round(seconds, 3))


def history_row(c: Candidate) -> dict[str, Any]:
    """One line of the run's history (the markdown report's table), for every proposal."""
    r = c.get("report") or {}
    return {"turn": c["turn"], "index": c["index"], "key": c["key"], "branch": c["branch"],
            "hit_limit": bool(c.get("hit_limit")), "blocks": c.get("blocks") or 0,
            "attempt_id": c.get("attempt_id"), "parent_id": c.get("parent_id"),
            "verdict": r.get("verdict") or "none", "category": r.get("category") or c.get("error") or "",
            "message": strip_ansi(r.get("message", "") if r else (c.get("error") or "")),
            "candidate_ms": metric(r, "candidate_ms"), "eager_ms": metric(r, "eager_ms"),
            "compile_ms": metric(r, "compile_ms"), "speedup_eager": metric(r, "speedup_eager"),
            "speedup_compile": metric(r, "speedup_compile"), "roofline_pct": metric(r, "roofline_pct"),
            "roofline_bound": (r.get("metrics") or {}).get("roofline_bound"),
            "device": (r.get("environment") or {}).get("device"),
            "tokens": c["tokens"]["input"] + c["tokens"]["output"], "cost_usd": c["cost_usd"],
            "reused": c.get("reused_from") is not None}
