"""`optimize`: start or resume one run of the loop, checkpointed in SQLite; also a small command line.

    python -m kernelagent.agent.run op.py --provider anthropic --turns 4 --json
    python -m kernelagent.agent.run op.py --resume RUN_ID --verify tests.fakes.verify:fake_verify

The command line exists for subprocess tests and demos; the user-facing one is `kernelagent optimize`.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sqlite3
import sys
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from kernelagent.agent.config import OptimizeConfig, home_dir
from kernelagent.agent.deps import Deps, RunContext
from kernelagent.agent.errors import ProviderError, RunFailed, RunInterrupted, RunNotFound
from kernelagent.agent.graph import build_graph
from kernelagent.agent.scoring import speed_measured, speedup
from kernelagent.agent.select import STOP_REASONS
from kernelagent.problem import inspect_problem

CHECKPOINT_DB = "checkpoints.db"


@dataclass
class OptimizeResult:
    """What a run produced; `to_dict()` is the `--json` document."""

    run_id: str
    status: str                       # a key of STOP_REASONS
    best: dict[str, Any] | None       # key, turn, attempt_id, source, report, speedup
    out_path: str | None
    report_path: str | None
    tokens: dict[str, int]
    cost_usd: float
    turns: int
    speed_measured: bool
    message: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.best is not None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "accepted": self.accepted}


def checkpoint_path(home: str | Path | None = None) -> Path:
    return home_dir(home) / CHECKPOINT_DB


def _result(values: dict[str, Any]) -> OptimizeResult:
    best = values.get("best")
    if best:
        best = {**best, "speedup": speedup(best["report"])}
    status = values.get("stop") or "interrupted"
    return OptimizeResult(
        run_id=values["run_id"], status=status, best=best, out_path=values.get("out_path"),
        report_path=values.get("report_path"), tokens=dict(values.get("tokens") or {}),
        cost_usd=values.get("cost_usd", 0.0), turns=values.get("turn", 0),
        speed_measured=bool(best) and speed_measured(best["report"]),
        message=STOP_REASONS.get(status, ""), history=list(values.get("history", [])))


def _start(problem_path: str, config: OptimizeConfig, deps: Deps) -> dict[str, Any]:
    """Register the problem and the run in memory; the graph's first input."""
    spec = inspect_problem(problem_path)
    run_id, problem_id = uuid.uuid4().hex[:12], None
    if deps.store is not None:
        problem_id = deps.store.upsert_problem(name=spec.name, source=spec.source, shapes=config.shapes)
        run_id = deps.store.start_run(problem_id=problem_id, provider=deps.provider.name,
                                      model=deps.provider.model, backend=config.backend,
                                      budget=_budget(config), config=config.to_dict())
    return {"run_id": run_id, "problem_id": problem_id, "problem_path": str(Path(problem_path).resolve()),
            "backend": config.backend, "config": config.to_dict(), "history": []}


def _budget(config: OptimizeConfig) -> dict[str, Any]:
    return {"turns": config.turns, "usd": config.budget_usd, "tokens": config.budget_tokens,
            "gpu_s": config.budget_gpu_s}


def optimize(problem_path: str | None, config: OptimizeConfig | None, deps: Deps, *,
             resume: str | None = None,
             progress: Callable[[dict[str, Any]], None] | None = None) -> OptimizeResult:
    """Run the loop to the end (or resume run `resume`); write the kernel and its report.

    On resume `problem_path` and `config` may be None: the run's own are used. Raises ProblemError for a
    bad problem file, RunNotFound for an unknown run id, RunFailed (with the run id) when the loop stops
    on an error such as the provider failing for good.
    """
    if progress is not None:
        deps = dataclasses.replace(deps, progress=progress)
    path = checkpoint_path(deps.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(str(path), check_same_thread=False)) as conn:
        graph = build_graph(SqliteSaver(conn))
        if resume:
            first, run_id, config = None, resume, _resumed_config(graph, resume, config)
        else:
            config = config or OptimizeConfig()
            first = _start(str(problem_path), config, deps)
            run_id = first["run_id"]
        thread = {"configurable": {"thread_id": run_id}}
        ctx = RunContext(deps=deps, config=config, workdir=home_dir(deps.home) / "runs" / run_id)
        ctx.emit("start", run_id=run_id, resumed=bool(resume), provider=deps.provider.name,
                 model=deps.provider.model, turns=config.turns, candidates=config.candidates,
                 budget_usd=config.budget_usd)
        return _invoke(graph, first, thread, ctx, run_id)


def _resumed_config(graph: Any, run_id: str, config: OptimizeConfig | None) -> OptimizeConfig:
    snapshot = graph.get_state({"configurable": {"thread_id": run_id}})
    if not snapshot.values:
        raise RunNotFound(f"no checkpoint for run {run_id!r}; `kernelagent history` lists runs")
    return config or OptimizeConfig.from_dict(snapshot.values.get("config") or {})


def _invoke(graph: Any, first: dict | None, thread: dict, ctx: RunContext, run_id: str) -> OptimizeResult:
    if first is None and not graph.get_state(thread).next:
        return _result(graph.get_state(thread).values)  # already finished
    if ctx.deps.store is not None and first is None:
        ctx.deps.store.update_run(run_id, status="running")
    try:
        limit = 3 * ctx.config.turns + 10  # three nodes a turn; older LangGraph stops at 25 steps
        values = graph.invoke(first, {**thread, "recursion_limit": limit}, context=ctx, durability="sync")
    except ProviderError as error:
        _mark_interrupted(ctx, run_id)
        raise RunFailed(f"run {run_id} stopped: {error}. Resume it with --resume {run_id}.",
                        run_id=run_id) from error
    except KeyboardInterrupt as error:
        _mark_interrupted(ctx, run_id)
        raise RunInterrupted(f"run {run_id} interrupted. Resume it with --resume {run_id}.",
                             run_id=run_id) from error
    return _result(values)


def _mark_interrupted(ctx: RunContext, run_id: str) -> None:
    if ctx.deps.store is not None:
        ctx.deps.store.update_run(run_id, status="interrupted")


def load_callable(spec: str) -> Callable[..., Any]:
    """`package.module:function` -> the function (for --verify and --prepare)."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kernelagent.agent.run", description=__doc__.splitlines()[0])
    p.add_argument("problem", nargs="?")
    for flag in ("--provider", "--model", "--base-url"):
        p.add_argument(flag)
    p.add_argument("--backend", default="triton", choices=["triton", "cute"])
    p.add_argument("--out")
    p.add_argument("--turns", type=int, default=OptimizeConfig.turns)
    p.add_argument("--candidates", type=int, default=OptimizeConfig.candidates)
    p.add_argument("--beam", type=int, default=OptimizeConfig.beam)
    p.add_argument("--target-speedup", type=float)
    p.add_argument("--budget-usd", type=float, default=OptimizeConfig.budget_usd)
    p.add_argument("--verify-workers", type=int, default=OptimizeConfig.verify_workers)
    p.add_argument("--resume")
    p.add_argument("--json", action="store_true")
    p.add_argument("--verify", default="kernelagent.verifier.api:verify", help="module:function")
    p.add_argument("--prepare", help="module:function returning baseline/roofline for a problem path")
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the JSON document (--json) or one summary line."""
    from kernelagent.agent.providers import make_provider
    from kernelagent.memory.store import open_store

    a = _parser().parse_args(argv)
    config = None if a.resume else OptimizeConfig(
        backend=a.backend, out=a.out, turns=a.turns, candidates=a.candidates, beam=a.beam,
        target_speedup=a.target_speedup, budget_usd=a.budget_usd, verify_workers=a.verify_workers)
    store = open_store()
    run = store.run(a.resume) if a.resume else None
    provider = make_provider(a.provider or (run or {}).get("provider"), a.model or (run or {}).get("model"),
                             a.base_url)
    deps = Deps(provider=provider, verify_fn=load_callable(a.verify), store=store)
    if a.prepare:
        deps.prepare_fn = load_callable(a.prepare)
    if a.json:
        result = optimize(a.problem, config, deps, resume=a.resume)
    else:
        from kernelagent.agent.progress import LiveView

        with LiveView() as view:
            result = optimize(a.problem, config, deps, resume=a.resume, progress=view)
    print(json.dumps(result.to_dict(), indent=2, default=str) if a.json
          else f"{result.run_id}: {result.status} -> {result.out_path}")
    return 0 if result.accepted else 1


if __name__ == "__main__":
    sys.exit(main())
