"""The `select` node: grow each answered call into a branch, keep the best B, decide whether to stop.

Every candidate's branch continues with its own reply and feedback, so the model always hears about
what it last wrote. A branch also carries its anchor, the best verified file of its lineage: when a
candidate does worse than its parent (a policy violation after a mismatch), the feedback shows both
the new verdict and the older file to build on. Branches rank by their anchor (`scoring.score`), then
by their own last candidate, newer first. A branch that failed `max_repairs` times in a row is dropped
(a debugging trap); when nothing is left the beam restarts from the first prompt with a note.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from kernelagent.agent.calls import prompt_chars
from kernelagent.agent.config import OptimizeConfig
from kernelagent.agent.deps import RunContext
from kernelagent.agent.feedback import FeedbackContext, candidate_feedback, restart_message
from kernelagent.agent.prompts import system_blocks
from kernelagent.agent.scoring import accepted, score, speed_measured, speedup, unverified
from kernelagent.agent.state import AgentState, Anchor, Branch, Candidate

STOP_REASONS = {
    "target_reached": "the best kernel reached the target speedup",
    "accepted_unmeasured": "a kernel was accepted; its speed was not measured (no GPU), so the run stopped",
    "stagnated": "no faster kernel for `patience` turns",
    "turns_exhausted": "the turn limit was reached",
    "budget_exhausted": "the next call's worst case would pass the dollar or token budget, "
                        "or the GPU-second budget is spent",
    "verifier_error": "the verifier itself failed on every candidate of a turn",
}


def anchor_of(cand: Candidate) -> Anchor | None:
    """The candidate as an anchor, when it was verified."""
    report = cand.get("report")
    if report is None:
        return None
    return Anchor(key=cand["key"], turn=cand["turn"], attempt_id=cand.get("attempt_id"),
                  score=list(score(report)), verdict=report.get("verdict", "rejected"),
                  category=report.get("category", "?"), speedup=speedup(report), source=cand.get("source") or "")


def next_anchor(previous: Anchor | None, cand: Candidate) -> Anchor | None:
    """The newer file when it scores at least as well as the branch's anchor, else the anchor."""
    own = anchor_of(cand)
    if own is None:
        return previous
    if previous is None or tuple(own["score"]) >= tuple(previous["score"]):
        return own
    return previous


def grow(cand: Candidate, parent: Branch | None, fc: FeedbackContext) -> Branch:
    """The branch that continues from `cand`: its conversation plus the reply and its feedback."""
    report = cand.get("report")
    anchor = next_anchor(parent.get("anchor") if parent else None, cand)
    messages = cand["messages"] + [
        {"role": "assistant", "content": cand.get("reply") or ""},
        {"role": "user", "content": candidate_feedback(cand, anchor, fc)}]
    # an unverified candidate compiled and was never run (no GPU): nothing failed that a repair could fix
    repairs = 0 if accepted(report) or unverified(report) else (parent.get("repairs", 0) if parent else 0) + 1
    return Branch(key=cand["key"], messages=messages, attempt_id=anchor.get("attempt_id") if anchor else None,
                  anchor=anchor, turn=cand["turn"], score=list(anchor["score"]) if anchor else [0, 0.0],
                  own=list(score(report)), repairs=repairs,
                  label=(report or {}).get("category") or cand.get("error") or "none")


def choose(pool: list[Branch], width: int, max_repairs: int) -> list[Branch]:
    """The best `width` live branches (one per anchor), ranked by anchor, own result, then recency."""
    seen, unique = set(), []
    ranked = sorted(pool, key=lambda b: (tuple(b["score"]), tuple(b.get("own") or b["score"]), b["turn"]),
                    reverse=True)
    for b in ranked:
        ident = b.get("attempt_id") or b["key"]
        if ident not in seen and b.get("repairs", 0) < max_repairs:
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
                cands: list[Candidate], budget_left: bool = True) -> str | None:
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
    if not budget_left or any(c.get("error") == "budget" for c in cands):
        return "budget_exhausted"
    if best and stale >= cfg.patience:
        return "stagnated"
    return None


def room_for_next(ctx: RunContext, state: AgentState, beam: list[Branch]) -> bool:
    """True when the smallest next call still fits the budgets (its worst case, before spending)."""
    gpu = ctx.config.budget_gpu_s
    if gpu is not None and state.get("verify_seconds", 0.0) >= gpu:
        return False
    if ctx.ledger is None:
        return True
    system = system_blocks(state["backend"])
    smallest = min((prompt_chars(system, b["messages"]) for b in beam), default=0)
    return ctx.ledger.fits(smallest, ctx.call_max_tokens)


def _restart(state: AgentState, pool: list[Branch]) -> Branch:
    worst = sorted(pool, key=lambda b: b.get("repairs", 0), reverse=True)[:3]
    summary = "; ".join(f"{b['key']}: {b.get('repairs', 0)} failed in a row, last {b['label']}" for b in worst)
    summary = summary or "no candidate"
    return Branch(key=f"restart{state['turn']}", messages=restart_message(state["root"], summary, state["turn"]),
                  attempt_id=None, anchor=None, turn=state["turn"], score=[0, 0.0], own=[0, 0.0], repairs=0,
                  label="restart")


def feedback_context(ctx: RunContext, best: dict | None) -> FeedbackContext:
    cfg = ctx.config
    return FeedbackContext(turns=cfg.turns, best=best, target=cfg.target_speedup, max_tokens=cfg.max_output_tokens,
                           labels=ctx.path_labels)


def select(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Keep the best branches, update the best kernel, and set `stop` when the run should end."""
    ctx, cfg = runtime.context, runtime.context.config
    cands = state["candidates"]
    best = best_of(cands, state.get("best"))
    stale = 0 if best is not state.get("best") else state["stale_turns"] + 1
    parents = {b["key"]: b for b in state["beam"]}
    fc = feedback_context(ctx, best)
    answered = [c for c in cands if (c.get("reply") or "").strip()]
    children = [grow(c, parents.get(c["branch"]), fc) for c in answered]
    unanswered = [b for b in state["beam"] if b["key"] not in {c["branch"] for c in answered}]
    pool = children + unanswered
    beam = choose(pool, max(1, min(cfg.beam, cfg.candidates)), cfg.max_repairs) or [_restart(state, pool)]
    stop = stop_reason(state, cfg, best, stale, cands, room_for_next(ctx, state, beam))
    _save_progress(ctx, state, best)
    ctx.emit("selected", turn=state["turn"], best_speedup=speedup(best["report"]) if best else None,
             accepted=best is not None, tokens=state["tokens"], cost_usd=state["cost_usd"], stop=stop,
             beam=[b["key"] for b in beam])
    return {"beam": beam, "best": best, "stale_turns": stale, "stop": stop, "candidates": []}


def _save_progress(ctx: RunContext, state: AgentState, best: dict | None) -> None:
    if ctx.deps.store is not None:
        ctx.deps.store.update_run(state["run_id"], tokens_in=state["tokens"]["input"],
                                  tokens_out=state["tokens"]["output"], cost_usd=state["cost_usd"],
                                  best_attempt_id=best.get("attempt_id") if best else None)
