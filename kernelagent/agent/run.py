"""`optimize`: start or resume one run of the loop, checkpointed in SQLite.

The command line is `kernelagent optimize` (kernelagent/cli/optimize.py); this module is its engine.
A run that stops on a provider failure is marked `failed` in memory with how to resume it; Ctrl-C marks
it `interrupted`. Either way every reply already paid for stays in the run's `replies.jsonl`.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import tempfile
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from kernelagent.agent.budget import Ledger, Limits
from kernelagent.agent.config import OptimizeConfig, home_dir
from kernelagent.agent.deps import Deps, RunContext
from kernelagent.agent.errors import ProviderError, RunFailed, RunInterrupted, RunNotFound
from kernelagent.agent.graph import build_graph
from kernelagent.agent.preflight import price_of
from kernelagent.agent.providers.prices import Price
from kernelagent.agent.replies import ReplyLog
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

    @property
    def unverified(self) -> bool:
        """No kernel accepted, but one compiled that could not be run (no GPU): nothing was verified."""
        return self.best is None and any(row.get("verdict") == "unverified" for row in self.history)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "accepted": self.accepted, "unverified": self.unverified}


def checkpoint_path(home: str | Path | None = None) -> Path:
    return home_dir(home) / CHECKPOINT_DB


def run_folder(home: str | Path | None, run_id: str) -> Path:
    """Where a run keeps its candidate files and replies: $KERNELAGENT_HOME/runs/<run id>."""
    return home_dir(home) / "runs" / run_id


def resume_hint(run_id: str) -> str:
    return f"kernelagent optimize --resume {run_id}"


def run_price(deps: Deps, config: OptimizeConfig) -> Price:
    """What the run's calls cost: the price the caller settled on, else the user's or the table's."""
    return deps.price if deps.price is not None else price_of(deps.provider, config)


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
            "gpu_s": config.budget_gpu_s, "max_output_tokens": config.max_output_tokens}


def path_labels(workdir: Path, problem_path: str | None, home: Path) -> dict[str, str]:
    """Local folders and what the model sees instead: the run folder and the problem's folder vanish."""
    labels = {str(Path(tempfile.gettempdir())): "<tmp>", str(Path.home()): "~", str(home): "$KERNELAGENT_HOME",
              str(workdir): ""}
    if problem_path:
        labels[str(Path(problem_path).resolve().parent)] = ""
    return labels


def make_context(deps: Deps, config: OptimizeConfig, run_id: str, problem_path: str | None) -> RunContext:
    """The run's context: its folder, reply log, and a ledger that starts from what was already spent."""
    workdir = run_folder(deps.home, run_id)
    replies = ReplyLog(workdir, store=deps.store, run_id=run_id if deps.store is not None else None,
                       provider=deps.provider.name)
    tokens, usd = replies.totals()
    limits = Limits(usd=config.budget_usd, tokens=config.budget_tokens, gpu_seconds=config.budget_gpu_s)
    ledger = Ledger(limits, run_price(deps, config), spent_usd=usd, spent_tokens=sum(tokens.values()))
    return RunContext(deps=deps, config=config, workdir=workdir, ledger=ledger, replies=replies,
                      path_labels=path_labels(workdir, problem_path, home_dir(deps.home)))


def optimize(problem_path: str | None, config: OptimizeConfig | None, deps: Deps, *,
             resume: str | None = None,
             progress: Callable[[dict[str, Any]], None] | None = None) -> OptimizeResult:
    """Run the loop to the end (or resume run `resume`); write the kernel and its report.

    On resume `problem_path` and `config` may be None: the run's own are used. Raises ProblemError for a
    bad problem file, UnknownPrice when no price is known for the model, RunNotFound for an unknown run
    id, RunFailed (with the run id) when the loop stops on an error such as the provider failing for good,
    RunInterrupted on Ctrl-C.
    """
    if progress is not None:
        deps = dataclasses.replace(deps, progress=progress)
    path = checkpoint_path(deps.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(str(path), check_same_thread=False)) as conn:
        graph = build_graph(SqliteSaver(conn))
        if resume:
            first, run_id = None, resume
            config, problem_path = _resumed(graph, resume, config)
        else:
            config = config or OptimizeConfig()
            run_price(deps, config)  # an unknown price is refused before the run is registered
            first = _start(str(problem_path), config, deps)
            run_id = first["run_id"]
        thread = {"configurable": {"thread_id": run_id}}
        ctx = make_context(deps, config, run_id, problem_path)
        ctx.emit("start", run_id=run_id, resumed=bool(resume), provider=deps.provider.name,
                 model=deps.provider.model, turns=config.turns, candidates=config.candidates,
                 budget_usd=config.budget_usd)
        return _invoke(graph, first, thread, ctx, run_id)


def _resumed(graph: Any, run_id: str, config: OptimizeConfig | None) -> tuple[OptimizeConfig, str | None]:
    snapshot = graph.get_state({"configurable": {"thread_id": run_id}})
    if not snapshot.values:
        raise RunNotFound(f"no checkpoint for run {run_id!r}; `kernelagent history` lists runs")
    values = snapshot.values
    return config or OptimizeConfig.from_dict(values.get("config") or {}), values.get("problem_path")


def _invoke(graph: Any, first: dict | None, thread: dict, ctx: RunContext, run_id: str) -> OptimizeResult:
    if first is None and not graph.get_state(thread).next:
        return _result(graph.get_state(thread).values)  # already finished
    if ctx.deps.store is not None and first is None:
        ctx.deps.store.update_run(run_id, status="running", config=ctx.config.to_dict())
    try:
        limit = 3 * ctx.config.turns + 10  # three nodes a turn; older LangGraph stops at 25 steps
        values = graph.invoke(first, {**thread, "recursion_limit": limit}, context=ctx, durability="sync")
    except ProviderError as error:
        message = (f"run {run_id} failed: {error}. Replies already paid for are kept; "
                   f"resume with `{resume_hint(run_id)}`.")
        _mark(ctx, run_id, "failed", str(error))
        raise RunFailed(message, run_id=run_id) from error
    except KeyboardInterrupt as error:
        _mark(ctx, run_id, "interrupted", "interrupted (Ctrl-C)")
        raise RunInterrupted(f"run {run_id} interrupted; what had arrived is kept. Resume it with "
                             f"`{resume_hint(run_id)}`.", run_id=run_id) from error
    return _result(values)


def _mark(ctx: RunContext, run_id: str, status: str, reason: str) -> None:
    """Record why the run stopped, with spending so far and how to resume (in the run's config JSON)."""
    ctx.emit("stopped", status=status, reason=reason)
    if ctx.deps.store is None:
        return
    tokens, usd = ctx.replies.totals() if ctx.replies else ({}, 0.0)
    ctx.deps.store.update_run(run_id, status=status, tokens_in=tokens.get("input", 0),
                              tokens_out=tokens.get("output", 0), cost_usd=usd,
                              config={**ctx.config.to_dict(), "stopped_because": reason,
                                      "resume": resume_hint(run_id)})
