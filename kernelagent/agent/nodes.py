"""The `prepare` and `propose` nodes: plain functions of (state, runtime) returning a partial state.

Dependencies come from `runtime.context` (a RunContext); progress goes out as events, never printed.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from kernelagent.agent.calls import Call, reserve_all, run_calls
from kernelagent.agent.deps import RunContext
from kernelagent.agent.errors import ProviderError
from kernelagent.agent.extract import extract
from kernelagent.agent.feedback import first_prompt, parallel_note, trim_history
from kernelagent.agent.prompts import system_blocks
from kernelagent.agent.providers.base import Block
from kernelagent.agent.replies import request_key
from kernelagent.agent.state import AgentState, Branch, Candidate
from kernelagent.problem import inspect_problem

TOKEN_KEYS = ("input", "output", "cache_read", "cache_write")
EXAMPLE_KEYS = ("problem", "name", "backend", "speedup", "gpu", "source", "attempt_id")
TRUNCATED_STOPS = ("max_tokens", "length")


def zero_tokens() -> dict[str, int]:
    return dict.fromkeys(TOKEN_KEYS, 0)


def root_branch(messages: list[dict[str, str]]) -> Branch:
    return Branch(key="root", messages=messages, attempt_id=None, anchor=None, turn=0, score=[0, 0.0],
                  own=[0, 0.0], repairs=0, label="root")


def prepare(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Audit the problem, get baseline and roofline from prepare_fn, recall similar kernels and lessons."""
    ctx = runtime.context
    ctx.emit("stage", stage="preparing: running the reference")
    spec = inspect_problem(state["problem_path"])
    prepared = dict(ctx.deps.prepare_fn(spec.path) or {})
    store = ctx.deps.store
    if store is not None and prepared.get("op_signature"):
        store.upsert_problem(name=spec.name, source=spec.source, shapes=ctx.config.shapes,
                             op_signature=prepared["op_signature"])
    prepared["problem_id"] = state.get("problem_id")
    found = ctx.deps.retrieve_fn(store, prepared, state["backend"], ctx.config.examples)
    examples = [{k: e.get(k) for k in EXAMPLE_KEYS} for e in found.get("examples", [])]
    lessons = [str(x) for x in found.get("lessons", [])]
    problem = {"name": spec.name, "sha256": spec.sha256, "source": spec.source, "backward": spec.backward,
               "has_test_inputs": spec.has_test_inputs}
    opening = first_prompt(problem, state["backend"], prepared, examples, lessons, ctx.path_labels)
    root = [{"role": "user", "content": opening}]
    ctx.emit("prepared", problem=spec.name, baseline=prepared.get("baseline"),
             roofline=prepared.get("roofline"), examples=len(examples), lessons=len(lessons))
    return {"problem": problem, "prepared": prepared, "examples": examples, "lessons": lessons,
            "root": root, "beam": [root_branch(root)], "candidates": [], "best": None, "turn": 0,
            "stale_turns": 0, "tokens": zero_tokens(), "cost_usd": 0.0, "verify_seconds": 0.0, "stop": None}


def plan(beam: list[Branch], k: int) -> list[Branch]:
    """Which branch proposes each of the turn's k candidates: round-robin over the beam, best first."""
    return [beam[i % len(beam)] for i in range(k)]


def make_calls(ctx: RunContext, system: list[Block], branches: list[Branch], turn: int) -> list[Call]:
    """The turn's calls: each branch's trimmed conversation, distinct when a branch answers more than once."""
    counts: dict[str, int] = {}
    for b in branches:
        counts[b["key"]] = counts.get(b["key"], 0) + 1
    seen: dict[str, int] = {}
    calls = []
    for index, b in enumerate(branches):
        seen[b["key"]] = seen.get(b["key"], 0) + 1
        sent = parallel_note(trim_history(b["messages"], ctx.config.history_pairs), seen[b["key"]], counts[b["key"]])
        key = request_key(ctx.deps.provider.model, system, sent, ctx.call_max_tokens)
        reused = ctx.replies.complete_reply(turn, index, key) if ctx.replies else None
        calls.append(Call(turn=turn, index=index, messages=sent, key=key, reused=reused))
    return calls


def propose(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask the model for this turn's candidates, in parallel, each branch with its own conversation."""
    ctx = runtime.context
    turn = state["turn"] + 1
    branches = plan(state["beam"], ctx.config.candidates)
    ctx.emit("turn", turn=turn, turns=ctx.config.turns, candidates=len(branches))
    ctx.emit("stage", stage=f"turn {turn}: asking the model for {len(branches)} candidate(s)")
    system = system_blocks(state["backend"])
    calls = make_calls(ctx, system, branches, turn)
    reserve_all(calls, system, ctx.ledger, ctx.call_max_tokens)
    run_calls(ctx.deps.provider, system, calls, max_tokens=ctx.call_max_tokens, ledger=ctx.ledger,
              log=ctx.replies, emit=ctx.emit)
    cands = [to_candidate(ctx, b, c) for b, c in zip(branches, calls, strict=True)]
    made = [c for c in calls if not c.skipped]
    if made and all(c.reused is None and c.error is not None for c in made):
        raise ProviderError(f"every LLM call of turn {turn} failed; last: {made[-1].error}")
    tokens, cost = ctx.replies.totals()
    return {"turn": turn, "candidates": cands, "tokens": tokens, "cost_usd": cost}


def to_candidate(ctx: RunContext, branch: Branch, call: Call) -> Candidate:
    """The turn's candidate from one call: its file (if any) and how the reply ended."""
    cand = Candidate(key=f"t{call.turn}c{call.index}", turn=call.turn, index=call.index, branch=branch["key"],
                     parent_id=branch.get("attempt_id"), messages=branch["messages"], reply="", source=None,
                     truncated=False, tokens=zero_tokens(), cost_usd=0.0, path=None, report=None,
                     attempt_id=None, reused_from=None, error=None, hit_limit=False, blocks=0, chosen=0,
                     marked=False, stop_reason=None)
    if call.skipped:
        cand["error"] = "budget"
        ctx.emit("proposed", turn=call.turn, index=call.index, ok=False, error="budget")
        return cand
    rec = call.reused or call.record or {}
    cand["tokens"] = {k: int((rec.get("tokens") or {}).get(k, 0)) for k in TOKEN_KEYS}
    cand["cost_usd"] = float(rec.get("cost_usd") or 0.0)
    if rec.get("status") != "complete":
        cand["error"] = f"provider_error: {rec.get('error') or call.error}"
    else:
        _read_reply(cand, rec.get("text") or "", rec.get("stop_reason"))
    ctx.emit("proposed", turn=call.turn, index=call.index, ok=cand["source"] is not None, tokens=cand["tokens"],
             cost_usd=cand["cost_usd"], error=cand["error"], reused=call.reused is not None)
    return cand


def _read_reply(cand: Candidate, text: str, stop: str | None) -> None:
    found = extract(text)
    hit = stop in TRUNCATED_STOPS or found.truncated
    cand.update(reply=text, source=found.source, blocks=found.blocks, chosen=found.chosen, marked=found.marked,
                stop_reason=stop, hit_limit=hit, truncated=found.source is None and hit,
                error=None if found.source else "no_candidate")
