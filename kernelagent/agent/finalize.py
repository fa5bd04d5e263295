"""The `finalize` node: write the best kernel and the markdown report, close the run in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from kernelagent.agent.deps import RunContext
from kernelagent.agent.report_md import render_report
from kernelagent.agent.select import STOP_REASONS
from kernelagent.agent.state import AgentState


def default_out(problem_path: str, backend: str) -> Path:
    """Beside the problem: op.py -> op_triton.py (never the problem file itself)."""
    p = Path(problem_path)
    return p.with_name(f"{p.stem}_{backend}.py")


def report_info(ctx: RunContext, stop: str | None) -> dict[str, Any]:
    provider = ctx.deps.provider
    return {"provider": provider.name, "model": provider.model, "turns": ctx.config.turns,
            "budget_usd": ctx.config.budget_usd, "stop_text": STOP_REASONS.get(stop or "", "")}


def finalize(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Write `--out` (only when a kernel was accepted) and `<out>.md`; record the run's outcome."""
    ctx = runtime.context
    out = Path(ctx.config.out) if ctx.config.out else default_out(state["problem_path"], state["backend"])
    best = state.get("best")
    out_path = None
    if best:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(best["source"], encoding="utf-8")
        out_path = str(out)
    report_path = out.with_suffix(".md")
    final = {**state, "out_path": out_path, "report_path": str(report_path)}
    report_path.write_text(render_report(final, report_info(ctx, state.get("stop"))), encoding="utf-8")
    if ctx.deps.store is not None:
        ctx.deps.store.update_run(state["run_id"], status=state.get("stop") or "finished",
                                  tokens_in=state["tokens"]["input"], tokens_out=state["tokens"]["output"],
                                  cost_usd=state["cost_usd"], finished=True,
                                  best_attempt_id=best.get("attempt_id") if best else None)
    ctx.emit("done", status=state.get("stop"), out_path=out_path, report_path=str(report_path),
             accepted=best is not None)
    return {"out_path": out_path, "report_path": str(report_path)}
