"""The `prepare` and `propose` nodes: plain functions of (state, runtime) returning a partial state.

Dependencies come from `runtime.context` (a RunContext); progress goes out as events, never printed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph.runtime import Runtime

from kernelagent.agent.deps import RunContext
from kernelagent.agent.errors import ProviderAuthError, ProviderError
from kernelagent.agent.extract import extract_candidate, was_truncated
from kernelagent.agent.feedback import first_prompt, trim_history
from kernelagent.agent.prompts import system_blocks
from kernelagent.agent.providers.base import Block
from kernelagent.agent.state import AgentState, Branch, Candidate
from kernelagent.problem import inspect_problem

TOKEN_KEYS = ("input", "output", "cache_read", "cache_write")
EXAMPLE_KEYS = ("problem", "name", "backend", "speedup", "source", "attempt_id")
TRUNCATED_STOPS = ("max_tokens", "length")


def zero_tokens() -> dict[str, int]:
    return dict.fromkeys(TOKEN_KEYS, 0)


def root_branch(messages: list[dict[str, str]]) -> Branch:
    return Branch(key="root", messages=messages, attempt_id=None, turn=0, score=[0, 0.0], repairs=0,
                  label="root")


def prepare(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Audit the problem, get baseline and roofline from prepare_fn, recall similar kernels and lessons."""
    ctx = runtime.context
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
    root = [{"role": "user", "content": first_prompt(problem, state["backend"], prepared, examples, lessons)}]
    ctx.emit("prepared", problem=spec.name, baseline=prepared.get("baseline"),
             roofline=prepared.get("roofline"), examples=len(examples), lessons=len(lessons))
    return {"problem": problem, "prepared": prepared, "examples": examples, "lessons": lessons,
            "root": root, "beam": [root_branch(root)], "candidates": [], "best": None, "turn": 0,
            "stale_turns": 0, "tokens": zero_tokens(), "cost_usd": 0.0, "verify_seconds": 0.0, "stop": None}


def plan(beam: list[Branch], k: int) -> list[Branch]:
    """Which branch proposes each of the turn's k candidates: round-robin over the beam, best first."""
    return [beam[i % len(beam)] for i in range(k)]


def propose(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask the model for this turn's candidates, in parallel, each branch with its own conversation."""
    ctx = runtime.context
    turn = state["turn"] + 1
    branches = plan(state["beam"], ctx.config.candidates)
    ctx.emit("turn", turn=turn, turns=ctx.config.turns, candidates=len(branches))
    system = system_blocks(state["backend"])
    workers = max(1, min(len(branches), ctx.deps.provider.max_concurrency))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_ask, ctx, system, b, turn, i) for i, b in enumerate(branches)]
        cands = [f.result() for f in futures]
    if cands and all((c.get("error") or "").startswith("provider_error") for c in cands):
        raise ProviderError(f"every LLM call of turn {turn} failed; last: {cands[-1]['error']}")
    tokens = dict(state["tokens"])
    for c in cands:
        for key in TOKEN_KEYS:
            tokens[key] += c["tokens"][key]
    cost = state["cost_usd"] + sum(c["cost_usd"] for c in cands)
    return {"turn": turn, "candidates": cands, "tokens": tokens, "cost_usd": cost}


def _ask(ctx: RunContext, system: list[Block], branch: Branch, turn: int, index: int) -> Candidate:
    """One LLM call; a failed call (after the provider's retries) becomes a candidate with an error."""
    cand = Candidate(key=f"t{turn}c{index}", turn=turn, index=index, branch=branch["key"],
                     parent_id=branch["attempt_id"], messages=branch["messages"], reply="", source=None,
                     truncated=False, tokens=zero_tokens(), cost_usd=0.0, path=None, report=None,
                     attempt_id=None, reused_from=None, error=None)
    try:
        done = ctx.deps.provider.complete(system, trim_history(branch["messages"], ctx.config.history_pairs),
                                          max_tokens=ctx.config.max_output_tokens)
    except ProviderAuthError:
        raise
    except ProviderError as error:
        cand["error"] = f"provider_error: {error}"
        ctx.emit("proposed", turn=turn, index=index, ok=False, error=cand["error"])
        return cand
    cand["reply"], cand["source"] = done.text, extract_candidate(done.text)
    cand["truncated"] = cand["source"] is None and (was_truncated(done.text)
                                                    or done.raw_stop_reason in TRUNCATED_STOPS)
    cand["error"] = None if cand["source"] else "no_candidate"
    cand["tokens"] = {"input": done.input_tokens, "output": done.output_tokens,
                      "cache_read": done.cache_read_tokens, "cache_write": done.cache_write_tokens}
    cand["cost_usd"] = done.cost_usd
    ctx.emit("proposed", turn=turn, index=index, ok=cand["source"] is not None, tokens=cand["tokens"],
             cost_usd=done.cost_usd, error=cand["error"])
    return cand
