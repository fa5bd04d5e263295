"""The `select` node: grow each candidate into a branch, keep the best B, decide whether to stop.

Ranking is `scoring.score` (timed passes by speedup, then untimed passes, then near misses), newer
first on ties. A branch that failed `max_repairs` times in a row is dropped (a debugging trap); when
nothing is left the beam restarts from the first prompt with a note on what kept failing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from langgraph.runtime import Runtime

from kernelagent.agent.config import OptimizeConfig
from kernelagent.agent.deps import RunContext
from kernelagent.agent.feedback import candidate_feedback, restart_message
from kernelagent.agent.scoring import accepted, score, speed_measured, speedup
from kernelagent.agent.state import AgentState, Branch, Candidate

STOP_REASONS = {
    "target_reached": "the best kernel reached the target speedup",
    "accepted_unmeasured": "a kernel was accepted; its speed was not measured (no GPU), so the run stopped",
    "stagnated": "no faster kernel for `patience` turns",
    "turns_exhausted": "the turn limit was reached",
    "budget_exhausted": "the next turn would pass the dollar, token or GPU-time budget",
    "verifier_error": "the verifier itself failed on every candidate of a turn",
}


def grow(cand: Candidate, parent: Branch | None, *, turns: int, best: dict | None,
         target: float | None) -> Branch:
    """The branch that continues from `cand`: its conversation plus the reply and its feedback."""
    report = cand.get("report")
    messages = cand["messages"] + [
        {"role": "assistant", "content": cand.get("reply") or ""},
        {"role": "user", "content": candidate_feedback(cand, turns=turns, best=best, target=target)}]
    repairs = 0 if accepted(report) else (parent["repairs"] if parent else 0) + 1
    return Branch(key=cand["key"], messages=messages,
                  attempt_id=cand.get("attempt_id") or cand.get("parent_id"),
                  turn=cand["turn"], score=list(score(report)), repairs=repairs,
                  label=(report or {}).get("category") or cand.get("error") or "none")


def choose(pool: list[Branch], width: int, max_repairs: int) -> list[Branch]:
    """The best `width` live branches (one per attempt), newer first among equals."""
    seen, unique = set(), []
    for b in sorted(pool, key=lambda b: (tuple(b["score"]), b["turn"]), reverse=True):
        ident = b["attempt_id"] or b["key"]
        if ident not in seen and b["repairs"] < max_repairs:
            seen.add(ident)
            unique.append(b)
    return unique[:width]


def better(cand: dict[str, Any], best: dict[str, Any] | None) -> bool:
    """True when an accepted candidate beats the best so far (any pass beats none)."""
    return accepted(cand.get("report")) and (best is None or score(cand["report"]) > score(best["report"]))


def best_of(cands: list[Candidate], best: dict[str, Any] | None) -> dict[str, Any] | None:
    for c in cands:
        if better(c, best):
            best = {"key": c["key"], "turn": c["turn"], "index": c["index"],
                    "attempt_id": c.get("attempt_id"), "source": c["source"], "report": c["report"],
                    "path": c.get("path")}
    return best


def stop_reason(state: AgentState, cfg: OptimizeConfig, best: dict | None, stale: int,
                cands: list[Candidate]) -> str | None:
    """Why the loop should stop after this turn, or None to go on."""
    if best and not speed_measured(best["report"]):
        return "accepted_unmeasured"
    if best and cfg.target_speedup and (speedup(best["report"]) or 0.0) >= cfg.target_speedup:
        return "target_reached"
    reports = [c["report"] for c in cands if c.get("report")]
    if reports and all(r.get("category") == "internal_error" for r in reports):
        return "verifier_error"
    if state["turn"] >= cfg.turns:
        return "turns_exhausted"
    if _over_budget(state, cfg, cands):
        return "budget_exhausted"
    if best and stale >= cfg.patience:
        return "stagnated"
    return None


def _over_budget(state: AgentState, cfg: OptimizeConfig, cands: list[Candidate]) -> bool:
    """True when the next turn, costing about what this one did, would pass a budget."""
    turn_cost = sum(c["cost_usd"] for c in cands)
    turn_tokens = sum(c["tokens"]["input"] + c["tokens"]["output"] for c in cands)
    used_tokens = state["tokens"]["input"] + state["tokens"]["output"]
    checks = [(cfg.budget_usd, state["cost_usd"], turn_cost),
              (cfg.budget_tokens, used_tokens, turn_tokens),
              (cfg.budget_gpu_s, state["verify_seconds"], 0.0)]
    return any(limit is not None and (used >= limit or used + per_turn > limit)
               for limit, used, per_turn in checks)


def _restart(state: AgentState, pool: list[Branch]) -> Branch:
    counts = Counter(b["label"] for b in pool if b["attempt_id"])
    summary = ", ".join(f"{n}x {cat}" for cat, n in counts.most_common(3)) or "no candidate"
    return Branch(key=f"restart{state['turn']}", messages=restart_message(state["root"], summary),
                  attempt_id=None, turn=state["turn"], score=[0, 0.0], repairs=0, label="restart")


def select(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Keep the best branches, update the best kernel, and set `stop` when the run should end."""
    ctx, cfg = runtime.context, runtime.context.config
    cands = state["candidates"]
    best = best_of(cands, state.get("best"))
    improved = best is not state.get("best")
    stale = 0 if improved else state["stale_turns"] + 1
    parents = {b["key"]: b for b in state["beam"]}
    children = [grow(c, parents.get(c["branch"]), turns=cfg.turns, best=best, target=cfg.target_speedup)
                for c in cands if (c.get("reply") or "").strip()]
    kept = [dict(b, repairs=b["repairs"] + (0 if accepted_branch(b) else 1)) for b in state["beam"]]
    beam = choose(kept + children, max(1, min(cfg.beam, cfg.candidates)), cfg.max_repairs) \
        or [_restart(state, kept + children)]
    stop = stop_reason(state, cfg, best, stale, cands)
    _save_progress(ctx, state, best)
    ctx.emit("selected", turn=state["turn"], best_speedup=speedup(best["report"]) if best else None,
             accepted=best is not None, tokens=state["tokens"], cost_usd=state["cost_usd"], stop=stop,
             beam=[b["key"] for b in beam])
    return {"beam": beam, "best": best, "stale_turns": stale, "stop": stop, "candidates": []}


def accepted_branch(b: Branch) -> bool:
    return b["score"][0] >= 2


def _save_progress(ctx: RunContext, state: AgentState, best: dict | None) -> None:
    if ctx.deps.store is not None:
        ctx.deps.store.update_run(state["run_id"], tokens_in=state["tokens"]["input"],
                                  tokens_out=state["tokens"]["output"], cost_usd=state["cost_usd"],
                                  best_attempt_id=best.get("attempt_id") if best else None)
